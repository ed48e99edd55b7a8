-- The metrics of one recoding.
--   :groups  one row per generalized group: m = sample records, c = census people,
--            g = max(c, m) (METHODS.md decision 1)
--   :widths  one row per QI: lw = Σ_pos n_pos · ln w(pos), lm = Σ_pos n_pos · (w(pos) − 1)/(n_q − 1)
--            over the sample marginal of that QI, so Σ_G m ln W_G = Σ lw (METHODS.md decision 3)
--   :risk_term    m · r(g) of one group; :record_risk  r(g) (the risk model's record risk)
-- Groups are first counted per distinct (m, g, c < m): the UDFs then see one row per
-- distinct pair instead of one per group.
SELECT
  SUM(cnt * :risk_term) AS risk_sum,
  SUM(cnt * m / g) AS expected_reidentifications,
  MAX(:record_risk) AS max_record_risk,
  MIN(m) AS k,
  SUM(CASE WHEN m = 1 THEN cnt ELSE 0 END) AS sample_unique_records,
  SUM(cnt) AS groups,
  SUM(cnt * deid_xlogx(m)) AS group_xlogx,
  ANY_VALUE(wid.lw) AS width_log_sum,
  ANY_VALUE(wid.lm) AS lm_sum,
  SUM(cnt * m * m) AS discernibility,
  SUM(CASE WHEN corrected THEN cnt ELSE 0 END) AS corrected_groups,
  SUM(cnt * m) AS records
FROM (
  SELECT m, g, c < m AS corrected, COUNT(*) AS cnt FROM :groups AS grp GROUP BY m, g, c < m
) AS pairs
CROSS JOIN (SELECT SUM(lw) AS lw, SUM(lm) AS lm FROM :widths AS per_qi) AS wid
