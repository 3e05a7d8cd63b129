"""Developer tools that are not part of the installed package: the screenshot generator
(``python -m tools.screenshots``) and the headless-Chromium driver it shares with the browser
test. Run them from a checkout, with the project installed (``pip install -e '.[test]'``)."""
