-- description: The statistics-mode workbook, one row per output line with msprobe's 25 columns (spec §5.2, §5.4), and the default mode's Reason; the default mode's Result follows its colour rules and its Err_message says why a row is unmatched (docs/rules.md).
-- stat_result's rows, each relative error printed from its number (rel_text; as
-- msq/export/_sheetxml.c's percent_texts prints it for the workbook), each statistic and
-- difference the cell of its plain columns (plain_cell).
SELECT * EXCLUDE ("Max diff (text)", "Min diff (text)", "Mean diff (text)",
         "L2norm diff (text)", "NPU max (text)", "NPU min (text)",
         "NPU mean (text)", "NPU l2norm (text)", "Bench max (text)",
         "Bench min (text)", "Bench mean (text)", "Bench l2norm (text)",
         "NPU max (bool)", "NPU min (bool)", "NPU mean (bool)",
         "NPU l2norm (bool)", "Bench max (bool)", "Bench min (bool)",
         "Bench mean (bool)", "Bench l2norm (bool)", has_cell_text)
  REPLACE (rel_text("MaxRelativeErr") AS "MaxRelativeErr",
           rel_text("MinRelativeErr") AS "MinRelativeErr",
           rel_text("MeanRelativeErr") AS "MeanRelativeErr",
           rel_text("NormRelativeErr") AS "NormRelativeErr",
           plain_cell("Max diff", "Max diff (text)", NULL) AS "Max diff",
           plain_cell("Min diff", "Min diff (text)", NULL) AS "Min diff",
           plain_cell("Mean diff", "Mean diff (text)", NULL) AS "Mean diff",
           plain_cell("L2norm diff", "L2norm diff (text)", NULL) AS "L2norm diff",
           plain_cell("NPU max", "NPU max (text)", "NPU max (bool)") AS "NPU max",
           plain_cell("NPU min", "NPU min (text)", "NPU min (bool)") AS "NPU min",
           plain_cell("NPU mean", "NPU mean (text)", "NPU mean (bool)") AS "NPU mean",
           plain_cell("NPU l2norm", "NPU l2norm (text)", "NPU l2norm (bool)") AS "NPU l2norm",
           plain_cell("Bench max", "Bench max (text)", "Bench max (bool)") AS "Bench max",
           plain_cell("Bench min", "Bench min (text)", "Bench min (bool)") AS "Bench min",
           plain_cell("Bench mean", "Bench mean (text)", "Bench mean (bool)") AS "Bench mean",
           plain_cell("Bench l2norm", "Bench l2norm (text)", "Bench l2norm (bool)") AS "Bench l2norm")
FROM stat_result
