"""The storage seam: the abstract database, the one place a backend is chosen, the SQL
dialect, retry timing and the settings both backends share."""
