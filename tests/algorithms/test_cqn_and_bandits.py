"""CQN's loss and conservatism; the neural bandits' gradient features, design matrix,
exploration and state; bandit tables from files relative to the manifest, and bad ones."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from gymnasium import spaces

from agilerl.algorithms import CQN, NeuralTS, NeuralUCB

OBS = spaces.Box(-1.0, 1.0, (3,), np.float32)
NET = {"latent_dim": 8, "encoder_config": {"hidden_size": [8]},
       "head_config": {"hidden_size": [8]}}


def batch(rng: np.random.Generator, rows: int = 32, action: int | None = None) -> dict:
    return {"obs": rng.uniform(-1, 1, (rows, 3)).astype(np.float32),
            "next_obs": rng.uniform(-1, 1, (rows, 3)).astype(np.float32),
            "action": np.full(rows, action) if action is not None else rng.integers(0, 2, rows),
            "reward": rng.uniform(0, 1, rows).astype(np.float32),
            "done": (rng.random(rows) < 0.1).astype(np.float32)}


def test_cqn_loss_is_half_td_plus_weighted_cql() -> None:
    agent = CQN(OBS, spaces.Discrete(2), net_config=NET, seed=0, cql_alpha=2.5, double=True)
    data = batch(np.random.default_rng(0))
    q_all, q, target = agent.td_terms(data)
    expected = 0.5 * F.mse_loss(q, target) + 2.5 * (torch.logsumexp(q_all, -1) - q).mean()
    assert agent.learn(data)["loss"] == pytest.approx(float(expected.detach()), rel=1e-5)


def test_cqn_pushes_down_actions_the_dataset_never_takes() -> None:
    rng = np.random.default_rng(1)
    agent = CQN(OBS, spaces.Discrete(2), net_config=NET, seed=1, lr=1e-2, cql_alpha=1.0)
    plain = CQN(OBS, spaces.Discrete(2), net_config=NET, seed=1, lr=1e-2, cql_alpha=0.0)
    for _ in range(150):
        data = batch(rng, action=0)
        agent.learn(data)
        plain.learn(data)
    probe = torch.as_tensor(rng.uniform(-1, 1, (256, 3)).astype(np.float32))
    with torch.no_grad():
        gap = (agent.actor(probe)[:, 0] - agent.actor(probe)[:, 1]).mean()
        plain_gap = (plain.actor(probe)[:, 0] - plain.actor(probe)[:, 1]).mean()
    assert gap > plain_gap + 0.2  # the unseen action is valued below the dataset's


@pytest.fixture(params=[NeuralUCB, NeuralTS])
def bandit(request):
    return request.param(spaces.Box(0, 10, (12,), np.float32), spaces.Discrete(3),
                         net_config=NET, seed=0)


def test_neural_ts_starts_from_the_papers_gaussian_weights_and_ucb_does_not() -> None:
    """NeuralTS draws every dense weight from N(0, (4/fan_in)^2), the output layer's from
    N(0, (2/fan_in)^2), biases zero; NeuralUCB keeps the library's orthogonal weights."""
    net = {"latent_dim": 128, "encoder_config": {"hidden_size": [128]},
           "head_config": {"hidden_size": [128]}}
    space, arms = spaces.Box(0, 10, (12,), np.float32), spaces.Discrete(3)
    ts = NeuralTS(space, arms, net_config=net, seed=0)
    output = ts._output_layer()
    layers = [m for m in ts.actor.modules() if isinstance(m, torch.nn.Linear)]
    assert len(layers) >= 3
    for layer in layers:
        coeff = 2.0 if layer is output else 4.0
        assert float(layer.weight.std()) == pytest.approx(coeff / layer.in_features, rel=0.1)
        assert not layer.bias.any()
    again = NeuralTS(space, arms, net_config=net, seed=0)
    for a, b in zip(ts.actor.parameters(), again.actor.parameters(), strict=True):
        assert torch.equal(a, b)
    def gram(agent: NeuralTS | NeuralUCB) -> torch.Tensor:  # the head's hidden layer
        weight = agent.actor.head("q").linear(0).weight.detach()
        return weight @ weight.T / weight.square().sum(1).mean()

    eye = torch.eye(128)
    ucb = NeuralUCB(space, arms, net_config=net, seed=0)
    assert torch.allclose(gram(ucb), eye, atol=1e-4)  # orthogonal rows
    assert not torch.allclose(gram(ts), eye, atol=0.05)


def test_gradient_features_are_the_output_layers_gradient(bandit) -> None:
    context = np.random.default_rng(0).uniform(0, 5, (3, 12)).astype(np.float32)
    mean, features = bandit.scores_and_features(context)
    layer = bandit._output_layer()
    for arm in range(3):
        bandit.actor.zero_grad()
        bandit.actor(torch.as_tensor(context[arm:arm + 1])).sum().backward()
        grad = torch.cat([layer.weight.grad.reshape(-1), layer.bias.grad]).numpy()
        # unscaled, as the reference's (no 1/sqrt(width): that is a lamb width times larger)
        np.testing.assert_allclose(features[arm], grad, rtol=1e-5, atol=1e-6)
        with torch.no_grad():
            assert mean[arm] == pytest.approx(float(bandit.actor(
                torch.as_tensor(context[arm:arm + 1]))), rel=1e-5)


def test_first_pull_bonus_is_the_gradient_norm_over_sqrt_lamb() -> None:
    """Before any pull ``Z = lamb * I``, so the confidence width is ``||g|| / sqrt(lamb)``
    with ``g = [h, 1]`` the output layer's plain gradient, as the reference's: a hidden
    ``1/sqrt(m)`` scale would shrink every width (and the exploration) ``sqrt(m)`` times."""
    agent = NeuralUCB(spaces.Box(0, 10, (12,), np.float32), spaces.Discrete(3),
                      net_config=NET, seed=0, lamb=4.0)
    context = np.random.default_rng(5).uniform(0, 5, (3, 12)).astype(np.float32)
    with torch.no_grad():
        hidden = agent.actor.head("q").penultimate(
            agent.actor.encoder("encoder").forward(torch.as_tensor(context))).double().numpy()
    expected = np.sqrt((hidden ** 2).sum(axis=1) + 1.0) / 2.0
    mean, features = agent.scores_and_features(context)
    np.testing.assert_allclose(agent.confidence_widths(features), expected, rtol=1e-6)
    arm = agent.get_action(context)
    assert arm == int(np.argmax(mean + expected))


def test_design_inverse_tracks_the_pulls_and_greedy_leaves_it(bandit) -> None:
    rng = np.random.default_rng(2)
    pulled = []
    for _ in range(25):
        context = rng.uniform(0, 5, (3, 12)).astype(np.float32)
        arm = bandit.get_action(context)
        pulled.append(bandit.scores_and_features(context)[1][arm])
    design = bandit.lamb * np.eye(len(bandit.gram)) + sum(np.outer(g, g) for g in pulled)
    np.testing.assert_allclose(bandit.design_inv, np.linalg.inv(design), atol=1e-8)
    before = bandit.design_inv.copy()
    bandit.greedy_action(rng.uniform(0, 5, (3, 12)))
    np.testing.assert_array_equal(before, bandit.design_inv)


def test_a_pull_narrows_the_pulled_arms_confidence_most() -> None:
    agent = NeuralUCB(spaces.Box(0, 10, (6,), np.float32), spaces.Discrete(2),
                      net_config=NET, seed=0)
    context = np.array([[1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]], dtype=np.float32)
    features = agent.scores_and_features(context)[1]
    before = agent.confidence_widths(features)
    arm = agent.get_action(context)
    shrink = agent.confidence_widths(features) / before
    assert shrink[arm] < shrink[1 - arm] <= 1.0


def test_state_round_trip_and_architecture_change(bandit) -> None:
    rng = np.random.default_rng(3)
    for _ in range(5):
        bandit.get_action(rng.uniform(0, 5, (3, 12)))
        bandit.record_regret(1.0)
    clone = type(bandit).from_state(bandit.get_state())
    np.testing.assert_array_equal(clone.design_inv, bandit.design_inv)
    assert clone.regret == bandit.regret == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    context = rng.uniform(0, 5, (3, 12))
    assert clone.get_action(context) == bandit.get_action(context)
    plan = bandit.actor.draw_plan("add_nodes", np.random.default_rng(0), ["ReLU"])
    assert plan is not None
    bandit.apply_architecture_mutation("actor", plan)
    width = bandit._output_layer().in_features + 1
    assert bandit.design_inv.shape == (width, width)
    bandit.get_action(context)  # the new features fit the restarted design


def test_thompson_samples_repeat_from_the_seed() -> None:
    def pulls(seed: int) -> list[int]:
        agent = NeuralTS(spaces.Box(0, 10, (12,), np.float32), spaces.Discrete(3),
                         net_config=NET, seed=seed, gamma=5.0)
        rng = np.random.default_rng(0)
        return [agent.get_action(rng.uniform(0, 5, (3, 12))) for _ in range(30)]
    assert pulls(1) == pulls(1)
    assert pulls(1) != pulls(2)


def test_parquet_tables_relative_to_the_manifest(tmp_path: Path, monkeypatch) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    from agilerl.training.trainer import LocalTrainer

    folder = tmp_path / "project"
    (folder / "data").mkdir(parents=True)
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.normal(size=(40, 3)), columns=list("abc")).to_parquet(
        folder / "data" / "x.parquet")
    pd.DataFrame({"y": rng.integers(0, 2, 40)}).to_parquet(folder / "data" / "y.parquet")
    manifest = folder / "bandit.yaml"
    manifest.write_text(
        "algorithm: {name: NeuralTS, batch_size: 8}\n"
        "environment: {name: T, features: data/x.parquet, targets: data/y.parquet}\n"
        "replay_buffer: {max_size: 100}\n"
        "training: {max_steps: 20, evo_steps: 20, pop_size: 1, eval_steps: 20}\n")
    monkeypatch.chdir(tmp_path)  # not the manifest's folder
    trainer = LocalTrainer.from_manifest(manifest, seed=0)
    assert trainer.env.arms == 2 and trainer.env.n_features == 3
    population, fitnesses = trainer.train(verbose=False)
    assert population[0].steps[-1] == 20 and 0 <= fitnesses[0] <= 20


def test_bad_bandit_tables_name_the_table(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    from agilerl.core.errors import EnvironmentSetupError
    from agilerl.training.trainer import LocalTrainer

    features = tmp_path / "x.csv"
    pd.DataFrame({"a": [1.0, np.nan, 2.0], "b": [0.0, 1.0, 2.0]}).to_csv(features, index=False)
    targets = tmp_path / "y.csv"
    pd.DataFrame({"y": [0, 1]}).to_csv(targets, index=False)
    env = {"name": "T", "features": str(features), "targets": str(targets)}
    with pytest.raises(EnvironmentSetupError, match=r"x\.csv.*row 1 holds NaN"):
        LocalTrainer("NeuralUCB", env, seed=0)
    pd.DataFrame({"a": [1.0, 3.0], "b": [0.0, 1.0]}).to_csv(features, index=False)
    pd.DataFrame({"y": [0, 1, 1]}).to_csv(targets, index=False)
    with pytest.raises(EnvironmentSetupError, match=r"y\.csv.*targets has 3 rows, features has 2"):
        LocalTrainer("NeuralUCB", env, seed=0)


def test_csv_tables_are_read_without_pandas(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "x.csv").write_text("a,b\n1.5,2\n3,4\n5,6\n")
    (tmp_path / "y.csv").write_text("label\nsetosa\nvirginica\nsetosa\n")
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n3\n")
    script = (
        "import sys\nfrom types import SimpleNamespace\n"
        "from agilerl.envs.bandit import load_table, make_bandit_env\n"
        "env = make_bandit_env(SimpleNamespace(features='x.csv', targets='y.csv'))\n"
        "print(env.arms, env.n_features, env.arm_labels.tolist(), env.features[0].tolist())\n"
        "try:\n    load_table('bad.csv')\nexcept ValueError as exc:\n    print(exc)\n"
        "print('pandas' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={**__import__("os").environ,
                                                       "PYTHONPATH": str(Path.cwd())})
    lines = done.stdout.splitlines()
    assert lines[0] == "2 2 ['setosa', 'virginica'] [1.5, 2.0]", done.stderr
    assert "'bad.csv': every row needs 2 values" in lines[1]
    assert lines[2] == "False"
