"""The one table of key bindings and the logic around it, free of textual.

The footer, the help screen, the command palette hints and the docs are all generated from
`table.DEFAULT_KEYMAP` (or from the user's version of it, `overrides.apply_overrides`), so a key
never means one thing on screen and another in the docs. Nothing here imports textual: it is
tested without a terminal, and the docs are generated from it without starting the UI.

- `keys`: the key notation (`j`, `ctrl+d`, the chord `z z`) and its one canonical spelling;
- `table`: a binding, the keymap, the default table, the help and docs layout;
- `overrides`: the user's `[keys]` table applied, and the conflicts it must not create;
- `chords`: the machine that turns key presses into chord actions.
"""
