# From field report 003, python block 1.
# AFTER (FIXED):
# Convert to Python float to avoid keeping computation graph
all_st_ious.append(float(spatial_iou) if isinstance(spatial_iou, torch.Tensor) else spatial_iou)

# These are already numpy arrays from .cpu().numpy() conversion at lines 626-631
all_pred_bboxes.append(sample_pred_bboxes)  # ✓ Already numpy
all_pred_scores.append(sample_pred_scores)  # ✓ Already numpy
all_pred_classes.append(sample_pred_classes)  # ✓ Already numpy
all_gt_bboxes.append(gt_bboxes_list[i])     # ✓ Already numpy from line 630
all_gt_classes.append(gt_classes_list[i])   # ✓ Already numpy from line 631
