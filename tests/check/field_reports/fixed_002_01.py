# From field report 002, python block 1.
train_loader = torch.utils.data.DataLoader(
    train_dataset,
    batch_size=config['training']['batch_size'],
    num_workers=min(config['training']['nworkers'], 4),
    shuffle=True,
    pin_memory=True,
    prefetch_factor=2 if config['training']['nworkers'] > 0 else None,
    persistent_workers=config['training']['nworkers'] > 0,
    ...
)
