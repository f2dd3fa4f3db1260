"""The event log (:mod:`.log`): numbering, retention and the followers that resume by
number."""
