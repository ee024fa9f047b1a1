"""``fmlearn fit --task rank`` and ``fmlearn recommend --seen``: implicit feedback from events
files (user item [weight] lines)."""

import numpy as np
import pytest

from fmlearn import load
from fmlearn.cli import main


@pytest.fixture
def events(tmp_path):
    rng = np.random.default_rng(0)
    users = rng.integers(12, size=150)
    items = (users % 3) * 4 + rng.integers(4, size=150)
    train = tmp_path / "train.txt"
    lines = ["# user item [weight]"]
    lines += [f"{u}\t{i}" if t % 3 else f"{u},{i},2" for t, (u, i) in
              enumerate(zip(users[:120], items[:120], strict=True))]
    train.write_text("\n".join(lines) + "\n")
    test = tmp_path / "test.txt"
    test.write_text("\n".join(f"{u} {i}" for u, i in zip(users[120:], items[120:],
                                                        strict=True)) + "\n")
    return train, test, users[:120], items[:120]


def test_fit_rank_reports_metrics_and_saves_a_ranker(events, tmp_path, capsys):
    train, test, users, items = events
    model = tmp_path / "r.fmz"
    assert main(["fit", str(train), "--task", "rank", "--loss", "squared", "--n-factors", "4",
                 "--n-iter", "5", "--seed", "0", "--test", str(test), "--model",
                 str(model)]) == 0
    out = capsys.readouterr().out
    assert "users 0:12, items 12:24" in out and "test precision@10" in out
    est = load(model)
    assert type(est).__name__ == "FMRanker" and est.n_factors == 4 and est.n_iter_ == 5
    assert est.settings_["loss"] == "squared"


def test_recommend_seen_excludes_each_users_events(events, tmp_path, capsys):
    train, _, users, items = events
    model = tmp_path / "r.fmz"
    assert main(["fit", str(train), "--task", "rank", "--n-factors", "4", "--n-iter", "3",
                 "--seed", "1", "--model", str(model)]) == 0
    capsys.readouterr()
    assert main(["recommend", str(model), "--user-block", "0:12", "--user-ids", "3,5",
                 "--item-block", "12:24", "-k", "5", "--seen", str(train)]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert {int(r[0]) for r in rows} == {3, 5}
    for r in rows:
        assert int(r[2]) not in set(items[users == int(r[0])])


@pytest.mark.parametrize("text, match", [
    ("0 1\n1 x\n", "line 2: item id 'x'"),
    ("0 1\n1 2 -1\n", "line 2: weight '-1'"),
    ("0 1 2 3\n", "line 1: 4 fields"),
    ("# nothing\n", "holds no event"),
])
def test_bad_events_files_are_refused_with_their_line(tmp_path, capsys, text, match):
    path = tmp_path / "e.txt"
    path.write_text(text)
    assert main(["fit", str(path), "--task", "rank"]) == 2
    assert match in capsys.readouterr().err


def test_rank_refuses_options_of_other_tasks(events, capsys):
    train = events[0]
    assert main(["fit", str(train), "--task", "rank", "--stream"]) == 2
    assert "--stream does not apply to --task rank" in capsys.readouterr().err
