"""report: report.html and the model card (templates/) rendered from report.json. Layer 5, the last stage: may
import core and the results of every stage as data; nothing here imports predict, pipeline or cli."""
