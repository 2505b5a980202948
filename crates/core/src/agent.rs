//! The agent: shared services plus the registry of live session actors.

use crate::accounts::Accounts;
use crate::capability::{Capabilities, Capability, RegistryOptions};
use crate::config::AgentConfig;
use crate::error::{CoreError, Result};
use crate::services::Services;
use crate::session::{LiveSessions, SessionData, SessionHandle, spawn_session};
use crate::sync::lock;
use crate::tools::gate::{Gate, Gates};
use crate::tools::{Tool, ToolContext, ToolOutput, ToolRegistry};
use crate::turn::outbound::Contributor;
use mpa_model::ModelClient;
use mpa_protocol::{Actor, Outcome, ToolCall, UserId};
use mpa_store::Store;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Clone)]
pub struct Agent {
    services: Arc<Services>,
    sessions: Arc<LiveSessions>,
    accounts: Accounts,
}

/// A last say over the built-in tools.
type AdjustTools = Box<dyn FnOnce(&mut ToolRegistry) + Send>;

/// Adds one capability type to an assembly ([`AgentBuilder::configure`]).
type AddCapability = fn(&mut crate::capability::Assembly<'_>) -> Result<()>;

/// Builds an [`Agent`]: the configuration and store, the capabilities (configured from the
/// host's configuration, or given built), and — for a host's own additions and for tests — extra
/// tools, gates and contributors, appended after the standard ones.
pub struct AgentBuilder {
    cfg: AgentConfig,
    store: Store,
    host: Option<crate::host::HostConfig>,
    given: Capabilities,
    configured: Vec<AddCapability>,
    opts: RegistryOptions,
    tools: Vec<Arc<dyn Tool>>,
    gates: Vec<Arc<dyn Gate>>,
    contributors: Vec<Arc<dyn Contributor>>,
    adjust: Option<AdjustTools>,
}

impl AgentBuilder {
    /// Capabilities built by the caller: one of a standard type takes that type's place (and
    /// is not configured), any other comes after the standard ones.
    pub fn caps(mut self, caps: Capabilities) -> Self {
        for c in caps.iter() {
            self.given.push(Arc::clone(c));
        }
        self
    }

    /// The host's configuration: the standard capabilities configure themselves from it.
    /// Without it the agent has only the capabilities that need no configuration and those
    /// given.
    pub fn host(mut self, cfg: crate::host::HostConfig) -> Self {
        self.host = Some(cfg);
        self
    }

    pub fn options(mut self, opts: RegistryOptions) -> Self {
        self.opts = opts;
        self
    }

    /// A capability of the host's own, configured like the standard ones (from the host's
    /// configuration, after them).
    pub fn configure<T: crate::capability::Configure>(mut self) -> Self {
        self.configured.push(|a| a.add::<T>());
        self
    }

    /// A built capability (see [`AgentBuilder::caps`]).
    pub fn capability(mut self, c: Arc<dyn Capability>) -> Self {
        self.given.push(c);
        self
    }

    /// A built-in tool besides the capabilities' (replaces a tool of the same name).
    pub fn tool(mut self, t: Arc<dyn Tool>) -> Self {
        self.tools.push(t);
        self
    }

    /// A gate after the standard chain.
    pub fn gate(mut self, g: Arc<dyn Gate>) -> Self {
        self.gates.push(g);
        self
    }

    /// An outbound contributor after the standard ones.
    pub fn contributor(mut self, c: Arc<dyn Contributor>) -> Self {
        self.contributors.push(c);
        self
    }

    /// A last say over the built-in tools (the evaluation harness wraps `execute_command`).
    pub fn adjust(mut self, f: impl FnOnce(&mut ToolRegistry) + Send + 'static) -> Self {
        self.adjust = Some(Box::new(f));
        self
    }

    pub fn build(self) -> Result<Agent> {
        let model = ModelClient::new(self.cfg.model.clone())?;
        // A real tokenizer loads its vocabulary (a few hundred ms) off the first model call.
        let counter = mpa_model::TokenCounter::for_model(&self.cfg.model.model);
        if counter.is_tokenizer() {
            let warm = std::thread::Builder::new()
                .name("mpa-tokenizer".into())
                .spawn(move || counter.warm_up());
            if let Err(e) = warm {
                tracing::debug!(error = %e, "tokenizer warm-up not started; it loads on first use");
            }
        }
        let mut assembly = crate::capability::Assembly::new(
            self.host.as_ref(),
            Some(&self.store),
            &self.opts,
            self.given,
        );
        crate::capability::standard(&mut assembly)?;
        for add in self.configured {
            add(&mut assembly)?;
        }
        let caps = assembly.finish();
        let mut tools = crate::capability::registry_of(&caps);
        for t in self.tools {
            tools.register(t);
        }
        if let Some(adjust) = self.adjust {
            adjust(&mut tools);
        }
        let mut contributors = crate::turn::outbound::standard();
        contributors.extend(self.contributors);
        let accounts = Accounts::new(self.store.clone());
        let data_dir = self
            .store
            .path()
            .parent()
            .unwrap_or_else(|| std::path::Path::new("."))
            .to_path_buf();
        let attachments =
            crate::web::attachments::Attachments::new(data_dir.join("agent/runtime/attachments"));
        let personas = crate::web::personas::Personas::new(data_dir.join("agent/personas.json"));
        Ok(Agent {
            services: Arc::new(Services {
                cfg: self.cfg,
                model,
                store: self.store,
                tools: tools.into(),
                gates: Gates::standard_with(self.gates),
                contributors: contributors.into(),
                settle_rules: crate::turn::settle::standard().into(),
                caps: Arc::new(caps),
                personas: Arc::new(personas),
                attachments: Arc::new(attachments),
            }),
            sessions: Arc::new(Mutex::new(HashMap::new())),
            accounts,
        })
    }
}

/// Session ids only locate; they never authorise. Keep them to a safe alphabet so they can appear
/// in logs and file names without escaping. Server-side ids ([`server_session_id`]) are a user
/// prefix plus a client id, so they may be longer than [`MAX_CLIENT_SESSION_ID`].
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_CLIENT_SESSION_ID + USER_PREFIX_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '_' | '-'))
}

/// Longest session id a client may send.
pub const MAX_CLIENT_SESSION_ID: usize = 128;

/// `u` + 16 hex + `:`.
const USER_PREFIX_LEN: usize = 18;

/// The namespace of `user`'s sessions: `u<16 hex of SHA-256 over the user id>:`. User ids are
/// stable (a rename keeps them, a reused name gets a new one), so the namespace is too.
fn user_prefix(user: &UserId) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("mpa-session-owner:{}", user.0).as_bytes());
    format!("u{}:", &hex::encode(digest)[..16])
}

/// The server-side id of the session a client calls `client_id`, for `user`: the same client id
/// names a different session for every user, so no one can probe or squat another's ids.
pub fn server_session_id(user: &UserId, client_id: &str) -> String {
    format!("{}{client_id}", user_prefix(user))
}

/// The id the owner's clients use for the stored session `server_id` (the inverse of
/// [`server_session_id`]); a chat stored before ids were derived keeps its old id.
pub fn client_session_id<'a>(owner: &UserId, server_id: &'a str) -> &'a str {
    server_id
        .strip_prefix(user_prefix(owner).as_str())
        .unwrap_or(server_id)
}

/// Whose sessions a client's session id is looked up in ([`Agent::resolve_session`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionScope {
    /// The caller's own sessions. Every protocol entry (the stream API, the OpenAI endpoint) and
    /// the static admin token use only this: another user's id there is a missing one.
    Own,
    /// The web page's explicit admin continuation of another user's existing chat: the chat keeps
    /// its owner, tools run as the admin. Anyone else, or a chat that does not exist, is "not
    /// found".
    AdminContinue(UserId),
}

/// A client's session id resolved to the session it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRef {
    /// The server-side id (chat row, live actor, evidence).
    pub id: String,
    /// The id the client used and keeps using.
    pub client_id: String,
    /// Whose session it is (the caller, unless an admin continues another user's chat).
    pub owner: UserId,
    /// Whether it exists already (stored or live); otherwise using it creates it for the caller.
    pub exists: bool,
}

pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

impl Agent {
    /// An agent over `store` with no capability hubs yet (see [`AgentBuilder`]).
    pub fn builder(cfg: AgentConfig, store: Store) -> AgentBuilder {
        AgentBuilder {
            cfg,
            store,
            host: None,
            given: Capabilities::default(),
            configured: Vec::new(),
            opts: RegistryOptions::default(),
            tools: Vec::new(),
            gates: Vec::new(),
            contributors: Vec::new(),
            adjust: None,
        }
    }

    pub fn services(&self) -> &Arc<Services> {
        &self.services
    }

    /// The global persona.
    pub fn personas(&self) -> &crate::web::personas::Personas {
        &self.services.personas
    }

    /// Files users attached on the web page.
    pub fn attachments(&self) -> &crate::web::attachments::Attachments {
        &self.services.attachments
    }

    /// Users, passwords, tokens and login, over the agent's store.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// Whether `actor` may access a chat owned by `owner`.
    fn may_access(actor: &Actor, owner: &UserId) -> bool {
        actor.is_admin || &actor.user_id == owner
    }

    /// Who owns the session `server_id` (live or stored), if it exists.
    async fn owner_of(&self, server_id: &str) -> Result<Option<UserId>> {
        if let Some(h) = self.live(server_id) {
            return Ok(Some(h.owner().clone()));
        }
        // Only the owner column: a chat is never read before its owner has been checked.
        Ok(self.services.store.chat_owner(server_id).await?)
    }

    /// The session `client_id` names in `owner`'s namespace: the derived id, or — for chats
    /// stored before ids were derived — the old id itself when `owner` owns it. Another user's
    /// old id resolves like a missing one (a new derived id), so it can be neither read nor
    /// squatted.
    async fn locate(&self, owner: &UserId, client_id: &str) -> Result<SessionRef> {
        let derived = server_session_id(owner, client_id);
        let mut found = SessionRef {
            id: derived.clone(),
            client_id: client_id.to_string(),
            owner: owner.clone(),
            exists: false,
        };
        if self.owner_of(&derived).await?.as_ref() == Some(owner) {
            found.exists = true;
        } else if self.owner_of(client_id).await?.as_ref() == Some(owner) {
            found.id = client_id.to_string();
            found.exists = true;
        }
        Ok(found)
    }

    /// Resolves a client's session id (see [`SessionScope`]). An id a client may not send is
    /// [`CoreError::InvalidSessionId`]; an [`SessionScope::AdminContinue`] the caller may not
    /// use, or of a chat that does not exist, is [`CoreError::SessionNotFound`] either way.
    pub async fn resolve_session(
        &self,
        actor: &Actor,
        client_id: &str,
        scope: &SessionScope,
    ) -> Result<SessionRef> {
        if client_id.len() > MAX_CLIENT_SESSION_ID || !valid_session_id(client_id) {
            return Err(CoreError::InvalidSessionId(client_id.to_string()));
        }
        match scope {
            SessionScope::AdminContinue(owner) if owner != &actor.user_id => {
                if !actor.is_admin {
                    return Err(CoreError::SessionNotFound);
                }
                let found = self.locate(owner, client_id).await?;
                if found.exists {
                    Ok(found)
                } else {
                    Err(CoreError::SessionNotFound)
                }
            }
            _ => self.locate(&actor.user_id, client_id).await,
        }
    }

    /// The live session `session_id` (loaded from its snapshot, or new). Another user's session is
    /// reported as not found; admins may continue it and it keeps its original owner.
    pub async fn session(
        &self,
        actor: &Actor,
        session_id: &str,
        channel: &str,
    ) -> Result<SessionHandle> {
        self.session_owned(actor, session_id, channel, None).await
    }

    /// The body of [`Agent::session`] and [`Agent::submit_to`]: with `expect`, anything
    /// not owned by that user is "not found", and a missing session is created only when the
    /// expected owner is the caller.
    async fn session_owned(
        &self,
        actor: &Actor,
        session_id: &str,
        channel: &str,
        expect: Option<&UserId>,
    ) -> Result<SessionHandle> {
        if !valid_session_id(session_id) {
            return Err(CoreError::InvalidSessionId(session_id.to_string()));
        }
        let allowed = |owner: &UserId| match expect {
            Some(e) => e == owner && Self::may_access(actor, owner),
            None => Self::may_access(actor, owner),
        };
        if let Some(h) = self.live(session_id) {
            if !allowed(h.owner()) {
                return Err(CoreError::SessionNotFound);
            }
            return Ok(h);
        }
        // An actor that stopped taking turns (idle) may still be running turns queued just
        // before; load the snapshot only after its last one is written, or two actors would
        // serve the session and the older snapshot could win.
        let retiring = lock(&self.sessions).get(session_id).cloned();
        if let Some(old) = retiring {
            old.finished().await;
            let mut map = lock(&self.sessions);
            if map.get(session_id).is_some_and(|h| h.same_actor(&old)) {
                map.remove(session_id);
            }
        }
        let data = match self.services.store.chat(session_id).await? {
            Some(chat) => {
                if !allowed(&chat.user_id) {
                    return Err(CoreError::SessionNotFound);
                }
                let mut data = SessionData::from_chat(chat);
                // A chat stored before the message limits may hold a message no request can fit.
                crate::admission::recover(&self.services, actor, data.transcript.tail_mut(0)).await;
                data
            }
            // An admin continuing a chat that was deleted meanwhile must not create one.
            None if expect.is_some_and(|e| e != &actor.user_id) => {
                return Err(CoreError::SessionNotFound);
            }
            None => SessionData::new(session_id, actor.user_id.clone(), channel),
        };
        let mut map = lock(&self.sessions);
        // Another task may have loaded (or created) it meanwhile; keep the first.
        if let Some(h) = map.get(session_id)
            && !h.is_closed()
        {
            if !allowed(h.owner()) {
                return Err(CoreError::SessionNotFound);
            }
            return Ok(h.clone());
        }
        let handle = spawn_session(
            Arc::clone(&self.services),
            data,
            Arc::downgrade(&self.sessions),
        );
        map.insert(session_id.to_string(), handle.clone());
        Ok(handle)
    }

    /// A live session, if one is loaded (an actor forgets itself when it ends; one still
    /// finishing its queued turns after it stopped taking new ones stays known until then).
    pub fn live(&self, session_id: &str) -> Option<SessionHandle> {
        let mut map = lock(&self.sessions);
        match map.get(session_id) {
            Some(h) if h.is_closed() => {
                if h.is_finished() {
                    map.remove(session_id);
                }
                None
            }
            Some(h) => Some(h.clone()),
            None => None,
        }
    }

    /// Loads (or creates) the session with this server-side id and queues a turn in it as
    /// `actor` (local tools and tests; front ends resolve a client's id first, see
    /// [`Agent::submit_to`]). If the session's actor was reclaimed for idleness in between, it is
    /// loaded again from its snapshot once.
    pub async fn submit(
        &self,
        actor: &Actor,
        session_id: &str,
        channel: &str,
        text: String,
        images: Vec<String>,
    ) -> Result<tokio::sync::mpsc::UnboundedReceiver<mpa_protocol::Event>> {
        let op = mpa_protocol::Op::UserInput {
            text,
            images,
            client_context: None,
            lang: None,
        };
        self.submit_owned(actor, session_id, channel, None, op)
            .await
    }

    /// Queues `op` in the session (see [`Agent::session_owned`] for `expect`). If the session's
    /// actor was reclaimed for idleness in between, it is loaded again from its snapshot once.
    async fn submit_owned(
        &self,
        actor: &Actor,
        session_id: &str,
        channel: &str,
        expect: Option<&UserId>,
        op: mpa_protocol::Op,
    ) -> Result<tokio::sync::mpsc::UnboundedReceiver<mpa_protocol::Event>> {
        // Judged before the session is even loaded: a refused message leaves no trace.
        crate::admission::admit(&self.services, actor, &op).await?;
        let handle = self
            .session_owned(actor, session_id, channel, expect)
            .await?;
        let first = handle.send(actor, op.clone());
        let rx = match first {
            Err(CoreError::SessionClosed) if !handle.is_shutting_down() => self
                .session_owned(actor, session_id, channel, expect)
                .await?
                .send(actor, op)?,
            other => other?,
        };
        rx.ok_or(CoreError::SessionClosed)
    }

    /// Queues a turn as `actor` in a resolved session ([`Agent::resolve_session`]): the session
    /// keeps its owner, the turn (and its tools) runs as `actor`. `client_context` is a stateless
    /// client's earlier conversation, which a session the host has not seen takes in before the
    /// input (the OpenAI-compatible endpoint).
    pub async fn submit_to(
        &self,
        actor: &Actor,
        r: &SessionRef,
        channel: &str,
        text: String,
        images: Vec<String>,
        client_context: Option<mpa_protocol::ClientContext>,
    ) -> Result<tokio::sync::mpsc::UnboundedReceiver<mpa_protocol::Event>> {
        let op = mpa_protocol::Op::UserInput {
            text,
            images,
            client_context,
            lang: None,
        };
        self.submit_owned(actor, &r.id, channel, Some(&r.owner), op)
            .await
    }

    /// A message for `actor`'s running turn in a resolved session (spec runtime.md §2): queued
    /// in its steering inbox (acknowledged at once, applied at the turn's next model call), or
    /// — when no turn of this user can take it — queued as an ordinary turn, exactly as
    /// [`Agent::submit_to`] would. `lang`: the language of the host's own replies (a front
    /// end's negotiated locale; `None`: the message's). Another user's session is never reached: ids resolve in the
    /// caller's namespace, and a running turn takes only its own user's messages.
    pub async fn steer_to(
        &self,
        actor: &Actor,
        r: &SessionRef,
        channel: &str,
        text: String,
        images: Vec<String>,
        lang: Option<mpa_protocol::Lang>,
    ) -> Result<crate::session::Steered> {
        // Judged like a submission, before the session is even loaded: a steering message
        // becomes part of the conversation too.
        let op = mpa_protocol::Op::UserInput {
            text: text.clone(),
            images: images.clone(),
            client_context: None,
            lang,
        };
        crate::admission::admit(&self.services, actor, &op).await?;
        // A host command is answered at a turn's start, never steered; it goes as a turn with
        // the language its reply is read in.
        if crate::turn::host_command::is_command(&text) {
            return self
                .submit_owned(actor, &r.id, channel, Some(&r.owner), op)
                .await
                .map(crate::session::Steered::Turn);
        }
        let handle = self
            .session_owned(actor, &r.id, channel, Some(&r.owner))
            .await?;
        match handle.steer(actor, text.clone(), images.clone()) {
            // Reclaimed for idleness in between: loaded again once, as a submission would be.
            Err(CoreError::SessionClosed) if !handle.is_shutting_down() => self
                .session_owned(actor, &r.id, channel, Some(&r.owner))
                .await?
                .steer(actor, text, images),
            other => other,
        }
    }

    /// Gives a resolved, existing session the title `title` (1-80 characters, trimmed); later
    /// turns keep it. Applied between turns: it waits for a running turn to end.
    pub async fn rename_session(&self, actor: &Actor, r: &SessionRef, title: &str) -> Result<()> {
        let title = title.trim();
        let n = title.chars().count();
        if n == 0 || n > 80 || title.chars().any(char::is_control) {
            return Err(CoreError::InvalidInput(format!(
                "title must have 1-80 characters and no control characters (it has {n})"
            )));
        }
        self.check_access(actor, &r.id).await?;
        let handle = self
            .session_owned(actor, &r.id, "web", Some(&r.owner))
            .await?;
        let op = mpa_protocol::Op::Rename {
            title: title.to_string(),
        };
        if let Some(mut rx) = handle.send(actor, op)? {
            while rx.recv().await.is_some() {}
        }
        Ok(())
    }

    /// Regenerates the answer to the user's last message (`text` `None`) or sends `text` in its
    /// place (edit and resend), in a resolved session with no running turn
    /// ([`CoreError::SessionBusy`] otherwise). Returns the new turn's events.
    pub async fn redo(
        &self,
        actor: &Actor,
        r: &SessionRef,
        channel: &str,
        text: Option<String>,
    ) -> Result<tokio::sync::mpsc::UnboundedReceiver<mpa_protocol::Event>> {
        if self.live(&r.id).is_some_and(|h| h.is_processing()) {
            return Err(CoreError::SessionBusy);
        }
        if let Some(t) = &text {
            let op = mpa_protocol::Op::UserInput {
                text: t.clone(),
                images: Vec::new(),
                client_context: None,
                lang: None,
            };
            crate::admission::admit(&self.services, actor, &op).await?;
        }
        self.check_access(actor, &r.id).await?;
        self.submit_owned(
            actor,
            &r.id,
            channel,
            Some(&r.owner),
            mpa_protocol::Op::Redo { text },
        )
        .await
    }

    /// Stops the session's running turn (if any); `false` when nothing was running.
    pub fn stop(&self, session_id: &str) -> bool {
        self.live(session_id).is_some_and(|h| h.stop())
    }

    /// The chat `session_id` if `actor` may see it (owner or admin); otherwise not found, whether
    /// or not it exists.
    pub async fn chat_for(&self, actor: &Actor, session_id: &str) -> Result<mpa_store::Chat> {
        if !valid_session_id(session_id) {
            return Err(CoreError::SessionNotFound);
        }
        match self.services.store.chat(session_id).await? {
            Some(chat) if Self::may_access(actor, &chat.user_id) => Ok(chat),
            _ => Err(CoreError::SessionNotFound),
        }
    }

    /// Whether `actor` may access the session (a stored chat, or a live session not yet saved).
    pub async fn check_access(&self, actor: &Actor, session_id: &str) -> Result<()> {
        self.accessible_owner(actor, session_id).await.map(|_| ())
    }

    /// The owner of a session `actor` may access (see [`Agent::check_access`]).
    async fn accessible_owner(&self, actor: &Actor, session_id: &str) -> Result<UserId> {
        if let Some(h) = self.live(session_id) {
            return if Self::may_access(actor, h.owner()) {
                Ok(h.owner().clone())
            } else {
                Err(CoreError::SessionNotFound)
            };
        }
        Ok(self.chat_for(actor, session_id).await?.user_id)
    }

    /// Sessions visible to `actor`: their own, or everyone's for an admin when `all` is set.
    pub async fn list_sessions(
        &self,
        actor: &Actor,
        all: bool,
        page: u32,
        count: u32,
    ) -> Result<Vec<mpa_store::ChatSummary>> {
        let user = if actor.is_admin && all {
            None
        } else {
            Some(&actor.user_id)
        };
        Ok(self.services.store.list_chats(user, page, count).await?)
    }

    /// Stops the running turn of a session `actor` may access. `Ok(false)` when idle.
    pub async fn stop_session(&self, actor: &Actor, session_id: &str) -> Result<bool> {
        self.check_access(actor, session_id).await?;
        Ok(self.stop(session_id))
    }

    /// Deletes a chat `actor` may access: stops and closes its actor, deletes its evidence (with a
    /// tombstone), then the chat row. Safe to retry if the second step fails.
    pub async fn delete_session(&self, actor: &Actor, session_id: &str) -> Result<()> {
        // The owner never changes, so the one found by the access check keys the evidence.
        let owner = self.accessible_owner(actor, session_id).await?;
        self.stop(session_id);
        self.close_session(session_id).await;
        // Evidence first (with a tombstone so late appends cannot resurrect it), then the chat;
        // a failure in between leaves a chat that can be deleted again.
        if let Some(history) = self.services.caps.history()
            && let Err(e) = history
                .delete_session(&mpa_redact::UserKey::for_user(&owner), session_id)
                .await
        {
            tracing::error!(session = %session_id, error = %e, "evidence not deleted");
            return Err(CoreError::EvidenceUnavailable(e.to_string()));
        }
        // Its settled receipts go with it; an open one (`running`/`unknown`) stays until
        // verified, so a later look-up never reads a write that may have happened as missing.
        self.services
            .store
            .ledger_delete_resolved(&owner.0, session_id)
            .await?;
        self.services.store.delete_chat(session_id).await?;
        Ok(())
    }

    /// Stops every running turn of `user`'s sessions, for as long as the agent lives (an
    /// account that ended stops its turns; it holds no reference that keeps the agent alive).
    pub fn turn_stopper(&self) -> impl Fn(&UserId) + Send + Sync + 'static {
        let sessions = Arc::downgrade(&self.sessions);
        move |user: &UserId| {
            let Some(sessions) = sessions.upgrade() else {
                return;
            };
            for h in lock(&sessions).values() {
                if h.owner() == user {
                    h.stop();
                }
            }
        }
    }

    /// Closes and forgets a live session (used before deleting a chat).
    pub async fn close_session(&self, session_id: &str) {
        let handle = lock(&self.sessions).remove(session_id);
        if let Some(h) = handle {
            h.close().await;
        }
    }

    /// Stops every running turn and waits until each session has written its snapshot.
    pub async fn shutdown(&self) {
        // Nothing new starts once shutdown began (subagent submissions are sealed).
        for c in self.services.caps.iter() {
            c.begin_shutdown();
        }
        let handles: Vec<SessionHandle> = lock(&self.sessions).drain().map(|(_, h)| h).collect();
        for h in &handles {
            h.begin_shutdown();
            h.stop();
        }
        for h in handles {
            h.close().await;
        }
        for c in self.services.caps.iter() {
            c.shutdown().await;
        }
    }

    /// How many session actors are live (loaded, not yet ended).
    pub fn live_sessions(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// Runs one tool exactly as the agent would (same registry, policy and outcome rules), outside
    /// any model turn. Used by `mpagent tool`.
    pub async fn run_tool(
        &self,
        actor: &Actor,
        session_id: &str,
        name: &str,
        args: serde_json::Value,
    ) -> Result<(ToolOutput, Outcome)> {
        if self.services.tools.meta(name).is_none() {
            return Err(CoreError::UnknownTool(name.to_string()));
        }
        let (plan, channel) = match self.services.store.chat(session_id).await? {
            Some(chat) if Self::may_access(actor, &chat.user_id) => (
                crate::plan::Plan::restore_from(&chat.agent_messages),
                chat.channel,
            ),
            Some(_) => return Err(CoreError::SessionNotFound),
            None => (None, "cli".to_string()),
        };
        let call_id = format!("cli_{}", new_session_id());
        let mut ctx = ToolContext::detached(actor.clone(), session_id, &call_id);
        ctx.channel = channel;
        ctx.request_id = new_session_id();
        ctx.session.put(crate::plan::PlanState(plan));
        ctx.agent = crate::handle::AgentHandle::new(
            &self.services,
            crate::tools::policy::Origin::Direct,
            &ctx.request_id,
        );
        let call = ToolCall {
            id: call_id,
            name: name.to_string(),
            arguments: args.to_string(),
        };
        let done = crate::tools::invoke::invoke_one(
            self.services.invoker(),
            ctx,
            crate::tools::policy::Origin::Direct,
            &call,
        )
        .await;
        let outcome = done.output.outcome;
        Ok((done.output, outcome))
    }
}
