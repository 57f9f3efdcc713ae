# From field report 000, python block 3.
persistent_workers=False,  # 🔧 禁用persistent_workers防止記憶體累積
num_workers=min(train_config["num_workers"], 2),  # 🔧 限制worker數量
