-- description: The statistics-mode workbook, one row per output line with msprobe's 25 columns (spec §5.2, §5.4), and the default mode's Reason; the default mode's Result follows its colour rules and its Err_message says why a row is unmatched (docs/rules.md).
-- stat_result's rows, each relative error printed from its number (rel_text; as
-- msq/export/_sheetxml.c's percent_texts prints it for the workbook), each statistic and
-- difference the cell of its plain columns (plain_cell): its number, its text (cell_texts, in
-- the order of msq/export/outputs.py's PLAIN_CELLS) and a statistic's boolean (cell_bools); a
-- list is NULL on a row without any, and so is each member read of it.
SELECT * EXCLUDE (has_cell_text, cell_texts, cell_bools)
  REPLACE (rel_text("MaxRelativeErr") AS "MaxRelativeErr",
           rel_text("MinRelativeErr") AS "MinRelativeErr",
           rel_text("MeanRelativeErr") AS "MeanRelativeErr",
           rel_text("NormRelativeErr") AS "NormRelativeErr",
           plain_cell("Max diff", cell_texts[1], NULL) AS "Max diff",
           plain_cell("Min diff", cell_texts[2], NULL) AS "Min diff",
           plain_cell("Mean diff", cell_texts[3], NULL) AS "Mean diff",
           plain_cell("L2norm diff", cell_texts[4], NULL) AS "L2norm diff",
           plain_cell("NPU max", cell_texts[5], cell_bools[1]) AS "NPU max",
           plain_cell("NPU min", cell_texts[6], cell_bools[2]) AS "NPU min",
           plain_cell("NPU mean", cell_texts[7], cell_bools[3]) AS "NPU mean",
           plain_cell("NPU l2norm", cell_texts[8], cell_bools[4]) AS "NPU l2norm",
           plain_cell("Bench max", cell_texts[9], cell_bools[5]) AS "Bench max",
           plain_cell("Bench min", cell_texts[10], cell_bools[6]) AS "Bench min",
           plain_cell("Bench mean", cell_texts[11], cell_bools[7]) AS "Bench mean",
           plain_cell("Bench l2norm", cell_texts[12], cell_bools[8]) AS "Bench l2norm")
FROM stat_result
