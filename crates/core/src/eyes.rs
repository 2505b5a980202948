//! The agent's eyes and reach beyond MoviePilot: `view_image`, `read_file` and `search_web`,
//! one capability built from the host's folders, the public-address guard and the search
//! configuration. (The browser is a capability of its own.)

use crate::capability::{Capability, Configure, Setup};
use crate::file_boundary::FileBoundary;
use crate::net_guard::NetGuard;
use crate::tools::read_file::ReadFile;
use crate::tools::search_web::{SearchConfig, SearchWeb};
use crate::tools::view_image::ViewImage;
use crate::tools::{ToolRegistry, typed};

#[derive(Debug, Clone)]
pub struct Eyes {
    pub files: FileBoundary,
    pub net: NetGuard,
    pub search: SearchConfig,
}

impl Eyes {
    /// Reads under `workdir` and `data_dir` (per the caller), fetches public addresses only
    /// (the system's resolver), searches nowhere until `search` is set.
    pub fn new(
        workdir: impl Into<std::path::PathBuf>,
        data_dir: impl Into<std::path::PathBuf>,
    ) -> Self {
        Self {
            files: FileBoundary::new(workdir, data_dir),
            net: NetGuard::default(),
            search: SearchConfig::default(),
        }
    }
}

impl Configure for Eyes {
    fn configure(setup: &Setup<'_>) -> crate::Result<Option<Self>> {
        Ok(setup.host.map(|cfg| Eyes {
            search: cfg.search.clone(),
            ..Eyes::new(cfg.workdir.clone(), cfg.data_dir.clone())
        }))
    }
}

#[async_trait::async_trait]
impl Capability for Eyes {
    fn name(&self) -> &'static str {
        "eyes"
    }

    fn tools(&self, tools: &mut ToolRegistry) {
        tools.register(typed(ViewImage {
            files: self.files.clone(),
            net: self.net.clone(),
        }));
        tools.register(typed(ReadFile {
            files: self.files.clone(),
        }));
        tools.register(typed(SearchWeb::new(self.search.clone())));
    }
}
