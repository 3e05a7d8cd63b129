"""The dashboard's reader: one read-only connection, cheap change detection, bounded reads."""
