//! A message's parts as a flow's arguments.

use super::*;

/// The flow arguments a message's parts give `skill`:
/// - a data part holding an object: that object, the arguments by name;
/// - else text parts (joined with newlines): the value of the flow's
///   single `str` parameter;
/// - else nothing: a flow without parameters.
///
/// Files (`raw`, `url` parts) are refused.
pub fn arguments_for(
    params: &[(String, Type)],
    flow: &str,
    parts: &[Json],
) -> Result<Json, RpcError> {
    let mut data: Option<&Json> = None;
    let mut texts: Vec<&str> = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if let Some(d) = p.get("data") {
            if !d.is_object() {
                return Err(RpcError::params(format!(
                    "message.parts[{i}].data must be an object of {flow}'s arguments"
                )));
            }
            if data.is_some() {
                return Err(RpcError::params(
                    "several data parts: send the arguments in one object",
                ));
            }
            data = Some(d);
        } else if let Some(t) = p.get("text") {
            let t = t.as_str().ok_or_else(|| {
                RpcError::params(format!("message.parts[{i}].text must be a string"))
            })?;
            texts.push(t);
        } else if p.get("raw").is_some() || p.get("url").is_some() || p.get("file").is_some() {
            return Err(RpcError::new(
                CONTENT_TYPE_NOT_SUPPORTED,
                "CONTENT_TYPE_NOT_SUPPORTED",
                format!("message.parts[{i}] is a file: AIS flows take text and data parts"),
            ));
        } else {
            return Err(RpcError::params(format!(
                "message.parts[{i}] has no text, data, raw or url"
            )));
        }
    }
    if let Some(d) = data {
        return Ok(d.clone());
    }
    match params {
        [] => Ok(json!({})),
        [(name, Type::Str)] if !texts.is_empty() => Ok(json!({name.as_str(): texts.join("\n")})),
        _ => {
            let sig: Vec<String> = params.iter().map(|(n, t)| format!("{n}: {t}")).collect();
            Err(RpcError::params(format!(
                "{flow} takes ({}): send a data part with an object of its arguments{}",
                sig.join(", "),
                if texts.is_empty() {
                    ""
                } else {
                    " (a text part fills only a single str parameter)"
                }
            )))
        }
    }
}

pub(super) fn arguments(skill: &Skill, parts: &[Json]) -> Result<Json, RpcError> {
    arguments_for(&skill.params, &skill.id, parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_map_to_arguments() {
        let one = vec![("topic".to_string(), Type::Str)];
        let two = vec![
            ("a".to_string(), Type::Str),
            ("n".to_string(), Type::Number),
        ];
        let text = json!([{"text": "bees"}, {"text": "wasps"}]);
        let text = text.as_array().map_or(&[][..], Vec::as_slice);
        assert_eq!(
            arguments_for(&one, "A.f", text),
            Ok(json!({"topic": "bees\nwasps"}))
        );
        let data = [json!({"data": {"a": "x", "n": 2}})];
        assert_eq!(
            arguments_for(&two, "A.g", &data),
            Ok(json!({"a": "x", "n": 2}))
        );
        let e = arguments_for(&two, "A.g", text).err().map(|e| e.code);
        assert_eq!(e, Some(INVALID_PARAMS));
        let file = [json!({"url": "https://x/y.png"})];
        let e = arguments_for(&one, "A.f", &file).err().map(|e| e.code);
        assert_eq!(e, Some(CONTENT_TYPE_NOT_SUPPORTED));
        assert_eq!(arguments_for(&[], "A.h", &[]), Ok(json!({})));
        let e = arguments_for(&one, "A.f", &[json!({"data": [1]})])
            .err()
            .map(|e| e.code);
        assert_eq!(e, Some(INVALID_PARAMS));
    }
}
