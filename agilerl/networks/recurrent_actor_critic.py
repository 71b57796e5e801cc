"""Actor-critic over recurrent (LSTM) encoders, for recurrent PPO.

The same architecture as :class:`~agilerl.networks.actor_critic.ActorCritic` (one shared
encoder or one per head, the same heads and action distributions) whose encoders carry a
recurrent state. The state of a batch is a dict: encoder name -> tensor ``(batch, ...)``
(batch first; see :class:`agilerl.modules.lstm.LSTMEncoder`), zero at an episode start.

* ``step(obs, hidden)``: one env step for a batch of sub-envs -> outputs and next state;
* ``sequence(obs, hidden, starts)``: ``T`` steps of ``N`` sequences at once (BPTT), the
  state zeroed where ``starts`` marks an episode start inside a sequence.
"""

from __future__ import annotations

from typing import cast

import torch

from agilerl.modules.encoder import EncoderInput
from agilerl.modules.lstm import LSTMEncoder
from agilerl.networks.actor_critic import ActorCritic

Hidden = dict[str, torch.Tensor]


class RecurrentActorCritic(ActorCritic):
    """Policy head ``policy`` and value head ``value`` over one or two LSTM encoders."""

    def initial_hidden(self, batch: int, device: torch.device | str = "cpu") -> Hidden:
        """Zero recurrent state for ``batch`` sub-envs."""
        return {n: self._lstm(n).initial_state(batch, device) for n in self.encoders}

    def _lstm(self, name: str) -> LSTMEncoder:
        return cast(LSTMEncoder, self.encoders[name])

    def step(self, obs: torch.Tensor, hidden: Hidden) -> tuple[torch.Tensor, torch.Tensor, Hidden]:
        """One step: policy output, value and the next state, for a batch ``(B, ...)``."""
        latents, new_hidden = {}, {}
        for name, encoder in self.encoders.items():
            latents[name], new_hidden[name] = encoder(obs, hidden[name])
        inputs = self.arch["head_inputs"]
        policy_out = self.heads["policy"](latents[inputs["policy"]])
        value = self.heads["value"](latents[inputs["value"]]).squeeze(-1)
        return policy_out, value, new_hidden

    def policy_step(self, obs: torch.Tensor, hidden: Hidden) -> tuple[torch.Tensor, Hidden]:
        """One step of the policy alone (the value encoder's state is carried too)."""
        name = self.arch["head_inputs"]["policy"]
        new_hidden = dict(hidden)
        for enc_name, encoder in self.encoders.items():
            latent, new_hidden[enc_name] = encoder(obs, hidden[enc_name])
            if enc_name == name:
                policy_latent = latent
        return self.heads["policy"](policy_latent), new_hidden

    def sequence(
        self, obs: torch.Tensor, hidden: Hidden, starts: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy outputs ``(T, N, ...)`` and values ``(T, N)`` of ``N`` sequences of
        ``T`` steps (``obs`` ``(T, N, ...)``), each from its state in ``hidden``."""
        latents = {
            name: self._lstm(name).sequence(obs, hidden[name], starts) for name in self.encoders
        }
        inputs = self.arch["head_inputs"]
        policy_out = self.heads["policy"](latents[inputs["policy"]])
        value = self.heads["value"](latents[inputs["value"]]).squeeze(-1)
        return policy_out, value

    def forward(
        self, obs: EncoderInput, hidden: Hidden | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy output and value of one step from ``hidden`` (zero state if None)."""
        assert isinstance(obs, torch.Tensor)  # an LSTM encoder reads flat vectors
        if hidden is None:
            hidden = self.initial_hidden(obs.shape[0], obs.device)
        policy_out, value, _ = self.step(obs, hidden)
        return policy_out, value

    def policy(self, obs: EncoderInput, hidden: Hidden | None = None) -> torch.Tensor:
        assert isinstance(obs, torch.Tensor)  # an LSTM encoder reads flat vectors
        if hidden is None:
            hidden = self.initial_hidden(obs.shape[0], obs.device)
        return self.policy_step(obs, hidden)[0]
