from memors_core.wire import to_json


def test_remember_then_search_finds_the_passage(memory):
    r = memory.remember("Quorum replication writes to a majority of replicas.", entities=["Quorum"])
    hits = to_json(memory.search("majority replicas"))["results"]
    assert [h["address"] for h in hits] == r.passages
