"""web: the browser target. The page (``static/``: index.html and one JS module), the web folder an export writes
(``folder``), the pinned npm runtimes it copies (``runtimes``, ``npm/``), the local server with the isolation
headers (``server``) and the headless-Chromium driver (``chromium``). Layer 2: may import core, errors, preprocess
and assets; no stage (export, check, verify, report, pipeline, cli) is imported here, they import it."""
