//! Close matches for an unknown operation id, so `unknown_operation` can say what was meant.
//! Models mostly get a word wrong (`subscribe.list`, `downloads.add`) or the order of words
//! (`list.subscription`), so words are matched first and whole-id edit distance breaks ties.

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Levenshtein distance over chars (ids are short; the quadratic table is a few hundred cells).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// How alike two words are: 1.0 equal, 0.7 one inflects the other (a shared stem of at least
/// four letters covering most of the shorter word, or one typo in a longer word), else 0.
fn word_similarity(a: &str, b: &str) -> f64 {
    if a == b {
        return 1.0;
    }
    let shorter = a.chars().count().min(b.chars().count());
    let stem = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    if (stem >= 4 && stem * 10 >= shorter * 6) || (shorter >= 4 && edit_distance(a, b) <= 1) {
        0.7
    } else {
        0.0
    }
}

/// The `limit` candidates closest to `query`, best first.
pub fn suggest<'a>(
    candidates: impl Iterator<Item = &'a str>,
    query: &str,
    limit: usize,
) -> Vec<&'a str> {
    let query = query.trim().to_lowercase();
    let qwords = words(&query);
    if qwords.is_empty() {
        return Vec::new();
    }
    let mut scored: Vec<(f64, usize, &'a str)> = candidates
        .filter_map(|id| {
            let cwords = words(id);
            let matched: f64 = qwords
                .iter()
                .map(|q| {
                    cwords
                        .iter()
                        .map(|c| word_similarity(q, c))
                        .fold(0.0, f64::max)
                })
                .sum();
            let distance = edit_distance(&query, id);
            let close_spelling = distance * 3 <= id.chars().count().max(3);
            if matched == 0.0 && !close_spelling {
                return None;
            }
            // Words the candidate has beyond the query cost a little, so `subscription.list`
            // beats `subscription.follow.list` for `subscribe.list`.
            let extra = cwords.len().saturating_sub(qwords.len()) as f64 * 0.1;
            let spelling_bonus = if close_spelling { 0.5 } else { 0.0 };
            Some((matched - extra + spelling_bonus, distance, id))
        })
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(b.2)));
    scored
        .into_iter()
        .take(limit)
        .map(|(_, _, id)| id)
        .collect()
}
