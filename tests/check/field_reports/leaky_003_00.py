# From field report 003, python block 0.
# BEFORE (MEMORY LEAK):
all_st_ious.append(spatial_iou)           # ❌ Keeps computation graph
all_pred_bboxes.append(sample_pred_bboxes)  # ❌ Keeps computation graph
all_pred_scores.append(sample_pred_scores)  # ❌ Keeps computation graph
all_pred_classes.append(sample_pred_classes) # ❌ Keeps computation graph
all_gt_bboxes.append(gt_bboxes_list[i])     # ❌ Keeps computation graph
all_gt_classes.append(gt_classes_list[i])   # ❌ Keeps computation graph
