import random
from collections import deque, namedtuple

import torch
from lightning.pytorch import LightningModule

Experience = namedtuple("Experience", ["state", "action", "reward", "done", "new_state"])


class ReplayBuffer:
    def __init__(self, capacity: int) -> None:
        self.buffer = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self.buffer)

    def append(self, experience: Experience) -> None:
        self.buffer.append(experience)

    def sample(self, batch_size: int):
        return random.sample(list(self.buffer), batch_size)


class Agent:
    def __init__(self, env, replay_buffer: ReplayBuffer) -> None:
        self.env = env
        self.replay_buffer = replay_buffer
        self.state = env.reset()

    @torch.no_grad()
    def play_step(self, net, epsilon: float = 0.0):
        action = net(torch.tensor([self.state])).argmax().item()
        new_state, reward, done, _ = self.env.step(action)
        self.replay_buffer.append(Experience(self.state, action, reward, done, new_state))
        self.state = new_state
        return reward, done


class DQNLightning(LightningModule):
    def __init__(self, env, net, replay_size: int = 200):
        super().__init__()
        self.net = net
        self.buffer = ReplayBuffer(replay_size)
        self.agent = Agent(env, self.buffer)

    def training_step(self, batch, nb_batch):
        reward, done = self.agent.play_step(self.net, 0.1)
        states, actions, rewards = batch
        return torch.nn.functional.mse_loss(self.net(states).squeeze(-1), rewards)
