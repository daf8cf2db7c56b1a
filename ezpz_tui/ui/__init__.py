"""The Textual app: screens, widgets, themes, key bindings; the only place textual is imported."""
