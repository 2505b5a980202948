//! The helper module handed to Python: signatures follow the tool's schema.

use mpa_kernel::{Helper, helper_signature, module_source};
use serde_json::json;

#[test]
fn signature_follows_the_schema() {
    let h = Helper {
        name: "moviepilot_api".into(),
        summary: "MoviePilot".into(),
        parameters: json!({"type": "object", "properties": {
            "operation_id": {"type": "string"}, "path_params": {}, "query": {}, "body": {},
            "class": {}, "bad-name": {}},
            "required": ["operation_id"]}),
    };
    assert_eq!(
        helper_signature(&h),
        "moviepilot_api(operation_id, path_params=None, query=None, body=None)"
    );
    let src = module_source(&[h]);
    assert!(src.contains("def moviepilot_api(operation_id, path_params=None"));
    assert!(src.contains("\"retry\""));
}
