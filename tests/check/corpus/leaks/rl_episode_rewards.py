# expect: TL102 TL107
def train(policy, env, optimizer, episodes):
    log_probs_history = []
    for episode in range(episodes):
        state = env.reset()
        dist = policy(state)
        action = dist.sample()
        log_prob = dist.log_prob(action)
        loss = -log_prob * env.step(action)[1]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log_probs_history.append(log_prob)
