"""The PostgreSQL engine: the storage protocol on one PostgreSQL database,
for agents on many machines sharing one memory (extra ``memors[postgres]``).
The only code that imports psycopg."""
