"""The Textual dashboard and the ``tether`` command line. Depends on ``engine`` and ``store``."""
