"""Reports: report.json's schema and verdicts (schema), report.html (html), the model card (card, snippets).

May import verify/check results as data only; nothing here imports pipeline or cli.
"""
