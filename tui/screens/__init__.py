"""The dashboard's screens: one per view, plus the run detail and the help overlay."""
