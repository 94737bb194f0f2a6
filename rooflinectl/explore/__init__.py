"""``rooflinectl explore``: an interactive roofline in the terminal (Textual).

Only ``app`` imports Textual; ``state``, ``chart``, ``canvas`` and ``describe`` are pure and import it not.
"""
