//! `current_time`: the current date and time in UTC or an IANA time zone.
//! The time zone database is built into the binary, so the answer does not
//! depend on the host's tzdata.

use jiff::{tz::TimeZone, Timestamp};
use serde_json::{json, Value};

/// Now, in `timezone` (UTC when `None`); an unknown zone is the tool's own error.
pub(crate) fn now(timezone: Option<&str>) -> Result<Value, String> {
    let name = timezone.unwrap_or("UTC");
    let tz = TimeZone::get(name).map_err(|_| {
        format!("unknown time zone '{name}'; use an IANA name such as Europe/Paris or America/New_York")
    })?;
    let zoned = Timestamp::now().to_zoned_datetime(tz);
    Ok(json!({
        "timezone": name,
        "datetime": zoned.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
        "date": zoned.strftime("%Y-%m-%d").to_string(),
        "time": zoned.strftime("%H:%M:%S").to_string(),
        "weekday": zoned.strftime("%A").to_string(),
        "utc_offset": zoned.strftime("%:z").to_string(),
        "unix_seconds": zoned.timestamp().as_second(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_by_default_and_named_zones() {
        let utc = now(None).unwrap();
        assert_eq!(utc["timezone"], "UTC");
        assert_eq!(utc["utc_offset"], "+00:00");
        let tokyo = now(Some("Asia/Tokyo")).unwrap();
        assert_eq!(tokyo["utc_offset"], "+09:00");
        assert!(tokyo["datetime"].as_str().unwrap().ends_with("+09:00"));
    }

    #[test]
    fn an_unknown_zone_is_the_tools_own_error() {
        assert_eq!(
            now(Some("Mars/Olympus_Mons")).unwrap_err(),
            "unknown time zone 'Mars/Olympus_Mons'; use an IANA name such as Europe/Paris or America/New_York"
        );
    }
}
