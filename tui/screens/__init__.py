"""The dashboard's screens: one per view (`*_view.py` over `live_screen.py`), the run detail, the
note review screen and the help overlay; `*_render.py` hold their pure rows and panels."""
