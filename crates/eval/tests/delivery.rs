//! What reached the model: rows carried by previews, reads and whole results.

use mpa_eval::delivery::Delivery;
use serde_json::Value;
use serde_json::json;

fn row(id: u64) -> Value {
    json!({"id": id, "name": format!("订阅{id}"), "description": "x".repeat(50)})
}

fn page() -> String {
    json!({"success": true, "data": (1..=10).map(row).collect::<Vec<_>>()}).to_string()
}

fn preview(text: &str, n: usize, id: &str) -> String {
    let head: String = text.chars().take(n).collect();
    json!({"tool_result_truncated": true, "result_id": id, "content_preview": head,
           "returned_chars": n, "next_offset": n})
    .to_string()
}

fn read(text: &str, from: usize, n: usize, id: &str) -> String {
    let part: String = text.chars().skip(from).take(n).collect();
    json!({"success": true, "result_id": id, "offset": from, "content": part}).to_string()
}

#[test]
fn a_row_cut_out_of_a_preview_is_not_delivered_until_it_is_read_on() {
    let full = page();
    let cut = full.len() / 2;
    let d = Delivery::from_tool_texts([preview(&full, cut, "r1")]);
    assert!(d.carried(&row(1)));
    assert!(!d.carried(&row(10)), "the last row was cut off");
    let d =
        Delivery::from_tool_texts([preview(&full, cut, "r1"), read(&full, cut - 7, 5000, "r1")]);
    assert!(d.carried(&row(10)) && d.carried(&row(5)));
    // A page read at an offset that leaves a gap still gives the rows inside it.
    let d = Delivery::from_tool_texts([read(&full, cut, 5000, "r2")]);
    assert!(d.carried(&row(10)) && !d.carried(&row(1)));
}

#[test]
fn whole_results_redactions_and_tiny_replies() {
    let d = Delivery::from_tool_texts([
        json!({"data": [{"id": 11, "cookie": "[REDACTED]", "name": "站点"}]}).to_string(),
        json!({"success": true, "data": {"id": 73}}).to_string(),
    ]);
    assert!(d.carried(&json!({"id": 11, "cookie": "c=1", "name": "站点"})));
    assert!(!d.carried(&json!({"id": 11, "cookie": "c=1", "name": "别的"})));
    assert!(
        !d.carried(&json!({"id": 73, "name": "新订阅"})),
        "an id alone is no row"
    );
    // Text around the JSON (a plan block appended to the message) does not hide it.
    let d = Delivery::from_tool_texts([format!("{}\n\n[plan] 1. read", page())]);
    assert!(d.carried(&row(3)));
}

#[test]
fn summariser_requests_do_not_count() {
    let tool = json!({"role": "tool", "tool_call_id": "c", "content": page()});
    let prompt = "Summarise the conversation so far.";
    let summariser = json!({"messages": [
        {"role": "system", "content": prompt}, tool.clone()]});
    assert!(!Delivery::from_requests(&[summariser], prompt).carried(&row(2)));
    let main = json!({"messages": [{"role": "user", "content": "task"}, tool]});
    let d = Delivery::from_requests(&[main.clone(), main], prompt);
    assert!(d.carried(&row(2)));
    assert_eq!(d.tool_messages(), 1);
}
