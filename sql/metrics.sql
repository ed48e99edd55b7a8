-- The metrics of one recoding, from its groups (one row per generalized group):
--   m = sample records, c = census people, g = max(c, m) (METHODS.md decision 1),
--   w = number of domain cells the group covers, lm = Σ_q (w_q - 1)/(n_q - 1).
SELECT
  SUM(deid_risk_term(m, g, :gamma)) AS risk_sum,
  SUM(m / g) AS expected_reidentifications,
  MAX(deid_risk_term(1, g, :gamma)) AS max_record_risk,
  MIN(m) AS k,
  SUM(CASE WHEN m = 1 THEN 1 ELSE 0 END) AS sample_unique_records,
  COUNT(*) AS groups,
  SUM(deid_kl_term(m, w)) AS kl_group_sum,
  SUM(m * lm) AS lm_sum,
  SUM(m * m) AS discernibility,
  SUM(CASE WHEN c < m THEN 1 ELSE 0 END) AS corrected_groups,
  SUM(m) AS records
FROM :groups AS grp
