# From field report 000, python block 5.
def on_validation_epoch_end(self):
    # 每個epoch都生成完整的scatter plots
    for i, dim_name in enumerate(dim_names):
        plt.figure(figsize=(8, 8))
        # ... 畫圖邏輯 ...
        plt.savefig(plot_path, dpi=300, bbox_inches='tight')
