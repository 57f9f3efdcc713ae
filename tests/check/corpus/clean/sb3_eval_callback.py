import numpy as np


class EvalCallback:
    def __init__(self, eval_env, eval_freq, log_path):
        self.eval_env, self.eval_freq, self.log_path = eval_env, eval_freq, log_path
        self.evaluations_results = []
        self.n_calls = 0

    def _on_step(self):
        self.n_calls += 1
        if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
            episode_rewards, episode_lengths = evaluate_policy(self.model, self.eval_env)
            self.evaluations_results.append(episode_rewards)
            np.savez(self.log_path, results=self.evaluations_results)
        return True
