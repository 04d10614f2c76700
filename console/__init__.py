"""dflash-console: a terminal console for SGLang GPU fleets."""

__version__ = "0.1.0"
