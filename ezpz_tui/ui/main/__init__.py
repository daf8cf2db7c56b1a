"""The main screen (:mod:`.screen`) and the objects it owns, one concern each."""
