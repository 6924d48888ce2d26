//! `smoothe search`: annealing with the oracle in the loop, resumed on
//! its log, and screened by a model.

mod common;
use common::learned::*;
use common::*;
use smoothe::learn::oracle::labels::Label;

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn search_anneals_with_the_oracle_within_its_budget() {
    let dir = fresh_dir("search");
    let graph = repo("datasets/esyn/mul3.json");
    let (calls, labels, out) = search_checked(&dir, &graph, &["--budget", "30"]);
    let made = std::fs::read_to_string(&calls).unwrap().lines().count();
    assert!(made <= 30, "{made} oracle calls for a budget of 30");
    // The result is the best labelled extraction, no worse than where it started.
    let costs: Vec<f64> = std::fs::read_to_string(&labels)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Label>(l).ok()?.value(None))
        .collect();
    let best = parse_json(&std::fs::read_to_string(&out).unwrap())["real_cost"].as_f64().unwrap();
    assert_eq!(best, costs.iter().copied().fold(f64::INFINITY, f64::min));
    assert!(best <= costs[..3].iter().copied().fold(f64::INFINITY, f64::min));
    assert!(costs.len() > 10, "annealing stopped after {} labels", costs.len());
    // A rerun with the budget spent asks the oracle nothing.
    search_checked(&dir, &graph, &["--budget", "30"]);
    assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), made);
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn a_search_resumed_on_its_log_starts_at_the_cheapest_label_and_relabels_nothing() {
    let graph = repo("datasets/esyn/mul3.json");
    // Where a fresh search of each seed starts: the cheapest of its greedy,
    // dag-greedy and linear-SmoothE starts (linear SmoothE moves with the seed).
    let start_of = |seed: &str| {
        let dir = fresh_dir(&format!("search-start-{seed}"));
        let (_, _, out) = search_checked(&dir, &graph, &["--jobs", "1", "--budget", "3", "--seed", seed]);
        parse_json(&std::fs::read_to_string(&out).unwrap())["trajectory"][0][1].as_f64().unwrap()
    };
    let mut seeds: Vec<(f64, &str)> = ["0", "1"].iter().map(|&s| (start_of(s), s)).collect();
    seeds.sort_by(|a, b| a.0.total_cmp(&b.0));
    let ((cheap, cheap_seed), (dear, dear_seed)) = (seeds[0], seeds[1]);
    assert!(cheap < dear, "both seeds start at {cheap}: nothing tells a resumed start from a fresh one");
    // A search of the cheap-starting seed, then one of the dear-starting
    // seed resumed on its log.
    let dir = fresh_dir("search-resume");
    let (_, _, out) = search_checked(&dir, &graph, &["--jobs", "1", "--budget", "30", "--seed", cheap_seed]);
    let first_best = parse_json(&std::fs::read_to_string(&out).unwrap())["real_cost"].as_f64().unwrap();
    assert!(first_best <= cheap);
    let (_, labels, out) = search_checked(&dir, &graph, &["--jobs", "1", "--budget", "45", "--seed", dear_seed]);
    let result = parse_json(&std::fs::read_to_string(&out).unwrap());
    // The chain starts at the first run's best, not at its own starts'.
    assert_eq!(result["trajectory"][0][1].as_f64().unwrap(), first_best);
    assert!(result["real_cost"].as_f64().unwrap() <= first_best);
    let keys: Vec<String> =
        std::fs::read_to_string(&labels).unwrap().lines().map(|l| parse_json(l)["extraction"].to_string()).collect();
    assert_eq!(keys.len(), 45, "the resumed run spends exactly the rest of the budget");
    let distinct: std::collections::HashSet<&String> = keys.iter().collect();
    assert_eq!(distinct.len(), keys.len(), "an extraction was labelled twice");
}

#[test]
#[ignore = "slow tier: cargo test --release -- --ignored"]
fn search_with_a_model_screening_its_moves_anneals_as_plain_search_until_the_first_fit() {
    let graph = repo("datasets/esyn/mul3.json");
    let mut runs = Vec::new();
    for screen in ["0", "16"] {
        let dir = fresh_dir(&format!("search-screen-{screen}"));
        let (calls, labels, out) = search_checked(&dir, &graph, &["--jobs", "1", "--screen", screen, "--budget", "40"]);
        assert_eq!(std::fs::read_to_string(&calls).unwrap().lines().count(), 40, "screen {screen}");
        let log: Vec<serde_json::Value> = std::fs::read_to_string(&labels).unwrap().lines().map(parse_json).collect();
        let best = log.iter().filter_map(|l| l["metrics"]["cost"].as_f64()).fold(f64::INFINITY, f64::min);
        let result = parse_json(&std::fs::read_to_string(&out).unwrap());
        assert_eq!(result["real_cost"].as_f64().unwrap(), best);
        assert_eq!(result["screen"].to_string(), screen);
        runs.push(log.iter().map(|l| l["extraction"].as_str().unwrap().to_string()).collect::<Vec<_>>());
    }
    // The same chain and moves: identical until the log holds the 20
    // labels the first model needs, then the model's choices.
    assert_eq!(runs[0][..20], runs[1][..20]);
    assert_ne!(runs[0][20..], runs[1][20..], "the model chose as plain annealing would, every time");
}
