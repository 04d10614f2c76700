"""Screens of the console: fleet, server, launch, chat, help and the small dialogs."""
