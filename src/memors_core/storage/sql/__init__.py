"""The repositories both SQL engines share.

Most of memors' SQL is the same on SQLite and PostgreSQL, so it is written
once, here, in SQLite's spelling (``?`` placeholders, ``json_each`` for a
list parameter, ``INSERT OR IGNORE``); an engine runs it through its own
``execute`` (PostgreSQL renders it with
:func:`memors_core.storage.postgres.dialect.render`) and overrides a method
where the engines differ (full-text search, the clocks, purge, transfer).
Nothing here imports a database driver.
"""
