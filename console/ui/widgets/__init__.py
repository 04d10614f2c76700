"""Widgets of the console: panes and views that render FleetState and never touch IO."""
