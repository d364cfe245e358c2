//! `google.iam.v1.IAMPolicy` on topics, subscriptions, snapshots and schemas. The endpoint
//! authenticates no one (as Google's emulator), so no policy could be enforced: every
//! caller may do everything. It answers so, truthfully — GetIamPolicy gives the empty
//! policy (nothing is restricted), TestIamPermissions grants every permission asked — and
//! refuses SetIamPolicy with UNIMPLEMENTED, rather than keep a policy that would protect
//! nothing. Each call checks that its resource exists (NOT_FOUND otherwise).

use googleapis_tonic_google_iam_v1::google::iam::v1 as iam;
use googleapis_tonic_google_pubsub_v1::google::pubsub::v1 as pb;
use tonic::{Request, Response, Status};

use crate::PubSub;
use crate::generated::i_a_m_policy_server::IAMPolicy;
use crate::generated::schema_service_server::SchemaService;
use crate::names::{Collection, to_broker};
use crate::status::from_broker;

impl PubSub {
    /// NOT_FOUND unless `resource` names a topic, subscription, snapshot or schema that
    /// exists.
    async fn check_resource(&self, resource: &str) -> Result<(), Status> {
        let collection = resource.split('/').nth(2).unwrap_or_default();
        match collection {
            "topics" => {
                let name = to_broker(resource, Collection::Topics)?;
                self.live_topic(&name, resource).map(|_| ())
            }
            "subscriptions" => self.subscription(resource).map(|_| ()),
            "snapshots" => {
                let name = to_broker(resource, Collection::Snapshots)?;
                self.broker()
                    .describe_snapshot(name.as_str())
                    .map(|_| ())
                    .map_err(from_broker)
            }
            "schemas" => SchemaService::get_schema(
                self,
                Request::new(pb::GetSchemaRequest {
                    name: resource.to_owned(),
                    view: pb::SchemaView::Basic as i32,
                }),
            )
            .await
            .map(|_| ()),
            _ => Err(Status::invalid_argument(format!(
                "{resource:?} is no topic, subscription, snapshot or schema"
            ))),
        }
    }
}

#[tonic::async_trait]
impl IAMPolicy for PubSub {
    async fn set_iam_policy(
        &self,
        request: Request<iam::SetIamPolicyRequest>,
    ) -> Result<Response<iam::Policy>, Status> {
        self.check_resource(&request.into_inner().resource).await?;
        Err(Status::unimplemented(
            "SetIamPolicy is not supported by this server: it authenticates no one (as \
             Google's emulator), so a policy could not be enforced",
        ))
    }

    async fn get_iam_policy(
        &self,
        request: Request<iam::GetIamPolicyRequest>,
    ) -> Result<Response<iam::Policy>, Status> {
        self.check_resource(&request.into_inner().resource).await?;
        Ok(Response::new(iam::Policy {
            version: 1,
            ..Default::default()
        }))
    }

    async fn test_iam_permissions(
        &self,
        request: Request<iam::TestIamPermissionsRequest>,
    ) -> Result<Response<iam::TestIamPermissionsResponse>, Status> {
        let request = request.into_inner();
        self.check_resource(&request.resource).await?;
        Ok(Response::new(iam::TestIamPermissionsResponse {
            permissions: request.permissions,
        }))
    }
}
