"""`dflash-console serve`: the same Textual console in a browser, through textual-serve, behind a token."""
