//! What a round of the loop labels: the model's own picks (its optimum
//! and SmoothE's other decodes) and the screened pool ranked by the
//! acquisition rule.

use crate::cost::CostModel;
use crate::extract::moves::screening_pool;
use crate::extract::SmoothE;
use crate::extraction::Extraction;
use crate::learn::active::acquisition::RoundView;
use crate::learn::active::round::{ModelRound, PickSource, Picks, RoundShare};
use crate::learn::active::train_cost::ActiveLoop;
use crate::learn::model::objective::LearnedCost;
use crate::progress::quiet;
use anyhow::Result;
use rand::seq::SliceRandom;

impl ActiveLoop<'_> {
    /// The model's own picks: its optimum (under a delay bound drawn for
    /// the round when the loop explores a front), from the incumbent, and
    /// a few more of SmoothE's best distinct decodes.
    pub(super) fn model_picks(
        &mut self,
        cost: &LearnedCost,
        parents: &[Extraction],
        model_round: ModelRound,
        picks: &mut Picks,
    ) -> Result<()> {
        let ModelRound { round, bar, share, front } = model_round;
        let s = &self.s;
        let g = &s.problem.graph;
        let below_bar = |mean: f64| bar.is_infinite() || mean < bar;
        // Predicts only where there is a bar to clear.
        let clears = |e: &Extraction| -> Result<bool> {
            Ok(bar.is_infinite() || below_bar(cost.predict_unmeasured(std::slice::from_ref(e))?[0].mean))
        };
        let front_round = match front {
            Some(front) => {
                let bases_and_best = [&self.bases[..], &parents[..1]].concat();
                let (original, problem, log) = (s.original, s.problem, &*self.log);
                front.draw(original, problem, log, &self.oracle_id, cost, &bases_and_best, &mut self.rng, s.device)?
            }
            None => None,
        };
        let (objective, starts): (&dyn CostModel, Vec<Extraction>) = match &front_round {
            Some(f) => (&f.objective, vec![parents[0].clone(), f.fastest.clone()]),
            None => (cost, parents[..1].to_vec()),
        };
        let smoothe = SmoothE {
            config: s.smoothe.config.clone(),
            seed: s.smoothe.seed + round as u64,
            device: s.smoothe.device.clone(),
            progress: quiet(),
        };
        let (best, pool, _) = smoothe.optimise_pool(s.problem, objective, share.per_round, &starts)?;
        let best = best.restricted_to_reachable(g)?;
        let predicted = cost.predict(std::slice::from_ref(&best))?[0];
        picks.optimum = Some((best.clone(), predicted));
        if below_bar(predicted.mean) && self.seen.insert(best.clone()) {
            picks.push(best, PickSource::Optimum);
        }
        for (e, _) in pool {
            let e = e.restricted_to_reachable(g)?;
            if picks.batch.len() < share.per_round / 4 && clears(&e)? && self.seen.insert(e.clone()) {
                picks.push(e, PickSource::Decode);
            }
        }
        Ok(())
    }

    /// The acquisition rule ranks a screened pool of new candidates and
    /// fills the round; a few more are labelled unranked, so the data keep
    /// an unbiased view.
    pub(super) fn screened_picks(
        &mut self,
        cost: &LearnedCost,
        parents: &[Extraction],
        radius: usize,
        share: &RoundShare,
        picks: &mut Picks,
    ) -> Result<()> {
        let config = self.s.config;
        let g = &self.s.problem.graph;
        let mut candidates = screening_pool(g, parents, config.screen, radius, &self.seen, &mut self.rng);
        let view = RoundView { data: &self.data, cost };
        let mut order = config.acquisition.ranker(config.beta).order(&candidates, &view, &mut self.rng)?;
        let picked = share.per_round.saturating_sub(picks.batch.len()).min(order.len());
        order[picked..].shuffle(&mut self.rng);
        for (rank, &i) in order.iter().take(picked + share.explore).enumerate() {
            let e = std::mem::replace(&mut candidates[i], Extraction::empty(0));
            picks.push(e, if rank < picked { PickSource::Acquisition } else { PickSource::Explore });
        }
        Ok(())
    }
}
