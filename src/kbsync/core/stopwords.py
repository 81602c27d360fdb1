"""English function words: they carry no topic, so search leaves them out.

Without them a question's "how do … work" would outweigh the one word that
matters, both in hashed embeddings and in full-text ranking (where they also
match nearly every row and make ranking slow).
"""

from __future__ import annotations

__all__ = ["STOPWORDS"]

STOPWORDS = frozenset(
    (
        "a about above after again all also am an and any are as at be because been before being "
        "below between both but by can could did do does doing down during each few for from "
        "further had has have having he her here hers him his how i if in into is it its itself "
        "just me more most my no nor not now of off on once only or other our ours out over own "
        "same she should so some such than that the their theirs them then there these they this "
        "those through to too under until up very was we were what when where which while who "
        "whom why will with would you your yours work works"
    ).split()
)
