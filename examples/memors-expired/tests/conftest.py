# The fixtures memors ships for plugin authors: memory, db_path, memors_cli.
pytest_plugins = ["memors_core.testing"]
