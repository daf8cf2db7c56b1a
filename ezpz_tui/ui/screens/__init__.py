"""Full screens and modal dialogs pushed by the app."""
