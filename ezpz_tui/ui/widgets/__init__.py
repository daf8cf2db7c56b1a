"""Widgets of the ezpz-tui screen, each fed by the app from UI-free core models."""
