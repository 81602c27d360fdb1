"""The application: :class:`~kbsync.app.knowledge_base.KnowledgeBase`, the noun every front
end uses, and what it delegates to (search, results, the served query path, watching).
"""
