//! `LocationFencePolicy`: the pure rule (the location-fencing source, "The rule"). With
//! the fence on, an ask may be allowed only when all hold: the map is fresh (the last good
//! fetch is at most 60 s old), the board's tenant has exactly one row, that row's
//! `location` equals ours and its `state` is `active` (compared trimmed and
//! case-insensitively). Anything else fails closed with one reason. No I/O, no clock of
//! its own: the caller passes `now_ms`.

use super::map::TenantRow;
use row_fence_contract::Reason;

/// A map older than this (ms since our own last good fetch) is `map_stale`.
pub const STALE_AFTER_MS: u64 = 60_000;

/// What the policy knows about the tenant map.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapState {
    /// False when no map URL is configured: nothing is ever fetched.
    pub configured: bool,
    /// The last good map, and when (our clock, ms since the Unix epoch) it was fetched.
    pub held: Option<(Vec<TenantRow>, u64)>,
    /// True when the last fetch failed.
    pub last_fetch_failed: bool,
}

/// The policy's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// `None`: allowed; else the reason (`map_*` and `fence_error` are COULD NOT READ, the
    /// others REFUSED).
    pub fenced: Option<Reason>,
    /// The tenant's epoch in the held map, whatever its freshness or location; -1 when the
    /// map has no single row for it (or there is no map or no tenant).
    pub epoch: i64,
}

/// Trimmed, case-insensitive equality (the source's comparison).
pub fn same(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

/// Decides for `tenant` (the board's tenant from the registry, if any) at `location`.
pub fn decide(location: &str, tenant: Option<&str>, map: &MapState, now_ms: u64) -> Decision {
    let tenant = tenant.map(str::trim).filter(|t| !t.is_empty());
    let rows: Vec<&TenantRow> = match (&map.held, tenant) {
        (Some((rows, _)), Some(t)) => rows.iter().filter(|r| same(&r.id, t)).collect(),
        _ => Vec::new(),
    };
    let epoch = match rows.as_slice() {
        [one] => one.epoch,
        _ => -1,
    };
    let fenced = |reason| Decision {
        fenced: Some(reason),
        epoch,
    };
    let Some((_, fetched_at_ms)) = &map.held else {
        return fenced(if !map.configured || !map.last_fetch_failed {
            Reason::MapMissing
        } else {
            Reason::MapUnreachable
        });
    };
    if now_ms.saturating_sub(*fetched_at_ms) > STALE_AFTER_MS {
        return fenced(Reason::MapStale);
    }
    if tenant.is_none() {
        return fenced(Reason::TenantUnknown);
    }
    let row = match rows.as_slice() {
        [] => return fenced(Reason::TenantNotInMap),
        [one] => one,
        _ => return fenced(Reason::TenantAmbiguous),
    };
    if !row.location.as_deref().is_some_and(|l| same(l, location)) {
        return fenced(Reason::MappedElsewhere);
    }
    if !row.state.as_deref().is_some_and(|s| same(s, "active")) {
        return fenced(Reason::TenantNotActive);
    }
    Decision {
        fenced: None,
        epoch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_000_000;

    fn row(id: &str, location: &str, state: &str, epoch: i64) -> TenantRow {
        TenantRow {
            id: id.into(),
            location: Some(location.into()),
            state: Some(state.into()),
            epoch,
        }
    }

    fn fresh(rows: Vec<TenantRow>) -> MapState {
        MapState {
            configured: true,
            held: Some((rows, NOW - 10_000)),
            last_fetch_failed: false,
        }
    }

    fn reason(d: Decision) -> Option<&'static str> {
        d.fenced.map(Reason::as_str)
    }

    #[test]
    fn the_allowed_case_tolerates_whitespace_and_case() {
        for (id, location, state) in [
            ("acme", "here", "active"),
            (" ACME ", " Here\t", " Active "),
            ("Acme", "HERE", "ACTIVE"),
        ] {
            let d = decide(
                "here",
                Some("acme"),
                &fresh(vec![row(id, location, state, 7)]),
                NOW,
            );
            assert_eq!(
                d,
                Decision {
                    fenced: None,
                    epoch: 7
                },
                "{id:?} {location:?} {state:?}"
            );
        }
        let d = decide(
            " HERE ",
            Some(" acme "),
            &fresh(vec![row("acme", "here", "active", 7)]),
            NOW,
        );
        assert_eq!(d.fenced, None);
    }

    #[test]
    fn no_map_is_missing_or_unreachable() {
        let unset = MapState {
            configured: false,
            held: None,
            last_fetch_failed: false,
        };
        assert_eq!(
            reason(decide("here", Some("acme"), &unset, NOW)),
            Some("map_missing")
        );
        let never = MapState {
            configured: true,
            held: None,
            last_fetch_failed: false,
        };
        assert_eq!(
            reason(decide("here", Some("acme"), &never, NOW)),
            Some("map_missing")
        );
        let failing = MapState {
            configured: true,
            held: None,
            last_fetch_failed: true,
        };
        let d = decide("here", Some("acme"), &failing, NOW);
        assert_eq!((reason(d.clone()), d.epoch), (Some("map_unreachable"), -1));
    }

    #[test]
    fn a_map_older_than_60_s_is_stale_but_its_epoch_is_still_reported() {
        let at = |age: u64| MapState {
            configured: true,
            held: Some((vec![row("acme", "here", "active", 3)], NOW - age)),
            last_fetch_failed: true,
        };
        assert_eq!(
            decide("here", Some("acme"), &at(60_000), NOW).fenced,
            None,
            "60 s is still fresh"
        );
        let d = decide("here", Some("acme"), &at(60_001), NOW);
        assert_eq!((reason(d.clone()), d.epoch), (Some("map_stale"), 3));
    }

    #[test]
    fn tenant_reasons_follow_the_table() {
        let map = fresh(vec![
            row("acme", "here", "active", 1),
            row("twice", "here", "active", 2),
            row("TWICE", "here", "active", 3),
            row("moved", "there", "active", 4),
            row("draining", "here", "draining", 5),
            row("reconciling", "here", " Reconciling", 6),
            TenantRow {
                id: "nowhere".into(),
                location: None,
                state: Some("active".into()),
                epoch: 8,
            },
            TenantRow {
                id: "stateless".into(),
                location: Some("here".into()),
                state: None,
                epoch: 9,
            },
        ]);
        let cases = [
            (None, "tenant_unknown", -1),
            (Some("  "), "tenant_unknown", -1),
            (Some("ghost"), "tenant_not_in_map", -1),
            (Some("twice"), "tenant_ambiguous", -1),
            (Some("moved"), "mapped_elsewhere", 4),
            (Some("nowhere"), "mapped_elsewhere", 8),
            (Some("draining"), "tenant_not_active", 5),
            (Some("reconciling"), "tenant_not_active", 6),
            (Some("stateless"), "tenant_not_active", 9),
        ];
        for (tenant, want, epoch) in cases {
            let d = decide("here", tenant, &map, NOW);
            assert_eq!(
                (reason(d.clone()), d.epoch),
                (Some(want), epoch),
                "{tenant:?}"
            );
        }
        let empty = fresh(vec![]);
        assert_eq!(
            reason(decide("here", Some("acme"), &empty, NOW)),
            Some("tenant_not_in_map"),
            "an empty map fences everyone"
        );
    }

    #[test]
    fn map_and_fence_reasons_are_could_not_read_and_tenant_reasons_refused() {
        for r in [
            Reason::MapMissing,
            Reason::MapUnreachable,
            Reason::MapStale,
            Reason::FenceError,
        ] {
            assert!(!r.is_refusal(), "{r}");
        }
        for r in [
            Reason::TenantUnknown,
            Reason::TenantNotInMap,
            Reason::TenantAmbiguous,
            Reason::MappedElsewhere,
            Reason::TenantNotActive,
        ] {
            assert!(r.is_refusal(), "{r}");
        }
    }
}
