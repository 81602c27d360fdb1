"""The pure core: values in, values out, no I/O, no clock, no environment.

Normalization (:mod:`.normalize`), content-defined chunking (:mod:`.chunking`), every
persisted hash (:mod:`.identity`), change reports (:mod:`.compare`), the plan of a sync
(:mod:`.plan`), revisit schedules (:mod:`.schedule`), and the arithmetic of the
embedding bill (:mod:`.costs`). The adapters and the sync build on these; nothing here
imports them.
"""
