"""Dynamo checks behind bench/results/precision_untuned15.md (FL1 recall and precision on
stable-baselines3 2.9.2, the HELD-OUT package of judge14, chosen before any finding was read;
torch 2.13 CPU).

Each run compiles real stable-baselines3 code (pure Python) with random weights, tiny networks,
seeded, the way its algorithms call a policy during collection (`policy(obs)`, `_predict`) and
training (`evaluate_actions`, `predict_values`, SAC's `action_log_prob` and critics, TD3's actor,
DQN's q-network): Box, Discrete, MultiDiscrete and MultiBinary action spaces, gSDE, image
observations (NatureCNN) and dict observations (CombinedExtractor). Runs labelled "train" keep
autograd on and call backward. Break sites come from dynamo's `graph_breaks` log
(bench/break_probe.py).

    PYTHONPATH=$PWD python bench/precision_untuned15_probes.py [--json SITES.json]

`--json` writes every package break site (package, model, file from the package root, line, gb id):
bench/results/precision_untuned15_sites.json, which `bench/rescore_judged.py --recall` scores.
"""

from __future__ import annotations

import sys

import torch
from break_probe import CallWith, probe_main

PACKAGES = ("stable_baselines3",)


def s_runs() -> list:
    import numpy as np
    from gymnasium import spaces
    from stable_baselines3 import A2C, DQN, PPO, SAC, TD3
    from stable_baselines3.common.policies import (
        ActorCriticCnnPolicy,
        ActorCriticPolicy,
        MultiInputActorCriticPolicy,
    )
    from stable_baselines3.common.preprocessing import preprocess_obs
    from stable_baselines3.dqn.policies import DQNPolicy
    from stable_baselines3.sac.policies import MultiInputPolicy as SACMulti
    from stable_baselines3.sac.policies import SACPolicy
    from stable_baselines3.td3.policies import TD3Policy

    torch.manual_seed(0)
    lr = lambda _: 1e-3  # noqa: E731
    box = spaces.Box(-1.0, 1.0, (5,), np.float32)
    act = spaces.Box(-1.0, 1.0, (2,), np.float32)
    image = spaces.Box(0, 255, (3, 36, 36), np.uint8)
    mixed = spaces.Dict({"vec": box, "pos": spaces.Discrete(4)})
    obs = torch.randn(4, 5)
    pixels = torch.randint(0, 256, (4, 3, 36, 36)).float()
    mixed_obs = {"vec": obs, "pos": torch.tensor([0.0, 1.0, 3.0, 2.0])}
    actions = torch.rand(4, 2) * 2 - 1
    small = dict(net_arch=[16, 16])

    def ac(action_space, cls=ActorCriticPolicy, space=box, **kw):
        return cls(space, action_space, lr, **{**small, **kw})

    def trained(algo, env="CartPole-v1", **kw):
        """The algorithm after a few collected steps, its `train` (one update) called as `learn` does."""
        model = algo("MlpPolicy", env, policy_kwargs=dict(small), seed=0, device="cpu", **kw)
        model.learn(32)
        return CallWith(
            None,
            lambda _m: model.train(
                **({"gradient_steps": 1, "batch_size": 8} if hasattr(model, "replay_buffer") else {})
            ),
        )

    def method(name):
        return lambda m, *args: getattr(m, name)(*args)

    discrete, multi, binary = spaces.Discrete(3), spaces.MultiDiscrete([3, 2]), spaces.MultiBinary(3)
    cases = [
        ("Box", lambda **kw: ac(act, **kw), obs, actions),
        ("Discrete", lambda **kw: ac(discrete, **kw), obs, torch.tensor([0, 2, 1, 1])),
        ("MultiDiscrete", lambda **kw: ac(multi, **kw), obs, torch.tensor([[0, 1], [2, 0], [1, 1], [0, 0]])),
        ("MultiBinary", lambda **kw: ac(binary, **kw), obs, torch.randint(0, 2, (4, 3)).float()),
        ("gSDE", lambda **kw: ac(act, use_sde=True, **kw), obs, actions),
        ("gSDE squashed", lambda **kw: ac(act, use_sde=True, squash_output=True, **kw), obs, actions),
        ("CNN", lambda **kw: ac(discrete, cls=ActorCriticCnnPolicy, space=image, **kw), pixels, torch.tensor([0, 2, 1, 1])),
        ("Dict", lambda **kw: ac(act, cls=MultiInputActorCriticPolicy, space=mixed, **kw), mixed_obs, actions),
    ]  # fmt: skip
    runs = []
    for name, build, o, a in cases:
        runs += [
            (f"ActorCriticPolicy {name} forward", build, (o,)),
            (f"ActorCriticPolicy {name} _predict", lambda b=build: CallWith(b(), method("_predict")), (o,)),
            (
                f"train ActorCriticPolicy {name} evaluate_actions",
                lambda b=build: CallWith(b(), method("evaluate_actions")),
                (o, a),
            ),
            (
                f"ActorCriticPolicy {name} predict_values",
                lambda b=build: CallWith(b(), method("predict_values")),
                (o,),
            ),
        ]
    runs += [
        ("ActorCriticPolicy separate extractors forward", lambda: ac(act, share_features_extractor=False), (obs,)),
        ("train SAC actor action_log_prob", lambda: CallWith(SACPolicy(box, act, lr, **small).actor, method("action_log_prob")), (obs,)),
        ("SAC policy forward", lambda: SACPolicy(box, act, lr, **small), (obs,)),
        ("train SAC gSDE actor action_log_prob", lambda: CallWith(SACPolicy(box, act, lr, use_sde=True, **small).actor, method("action_log_prob")), (obs,)),
        ("train SAC critic", lambda: SACPolicy(box, act, lr, **small).critic, (obs, actions)),
        ("SAC critic q1_forward", lambda: CallWith(SACPolicy(box, act, lr, **small).critic, method("q1_forward")), (obs, actions)),
        ("SAC Dict actor forward", lambda: SACMulti(mixed, act, lr, **small).actor, (mixed_obs,)),
        ("ActorCriticPolicy MultiDiscrete observations forward", lambda: ac(discrete, space=spaces.MultiDiscrete([3, 2])), (torch.tensor([[0, 1], [2, 0]]),)),
        ("ActorCriticPolicy Discrete observations forward", lambda: ac(discrete, space=spaces.Discrete(4)), (torch.tensor([0, 3]),)),
        ("ActorCriticPolicy MultiBinary observations forward", lambda: ac(discrete, space=spaces.MultiBinary(4)), (torch.randint(0, 2, (2, 4)).float(),)),
        ("ActorCriticPolicy Dict with image forward", lambda: ac(act, cls=MultiInputActorCriticPolicy, space=spaces.Dict({"img": image, "vec": box})), ({"img": pixels, "vec": obs},)),
        ("train PPO.train", lambda: trained(PPO, n_steps=16, batch_size=8, n_epochs=1), ()),
        ("train A2C.train", lambda: trained(A2C, n_steps=8), ()),
        ("train SAC.train", lambda: trained(SAC, env="Pendulum-v1", learning_starts=8, batch_size=8, train_freq=4), ()),
        ("train TD3.train", lambda: trained(TD3, env="Pendulum-v1", learning_starts=8, batch_size=8, train_freq=4), ()),
        ("train DQN.train", lambda: trained(DQN, learning_starts=8, batch_size=8, train_freq=4), ()),
        ("TD3 policy forward", lambda: TD3Policy(box, act, lr, **small), (obs,)),
        ("train TD3 actor", lambda: TD3Policy(box, act, lr, **small).actor, (obs,)),
        ("train TD3 critic", lambda: TD3Policy(box, act, lr, **small).critic, (obs, actions)),
        ("DQN policy forward", lambda: DQNPolicy(box, discrete, lr, **small), (obs,)),
        ("train DQN q_net", lambda: DQNPolicy(box, discrete, lr, **small).q_net, (obs,)),
        ("DQN CNN q_net", lambda: DQNPolicy(image, discrete, lr, **small).q_net, (pixels,)),
        ("preprocess_obs Dict", lambda: CallWith(mixed, lambda m, o: preprocess_obs(o, m)), (mixed_obs,)),
        ("preprocess_obs MultiDiscrete", lambda: CallWith(multi, lambda m, o: preprocess_obs(o, m)), (torch.tensor([[0, 1], [2, 0]]),)),
    ]  # fmt: skip
    return runs


if __name__ == "__main__":
    probe_main(s_runs, PACKAGES, "precision_untuned15_probes.py", sys.argv)
